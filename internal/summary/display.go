package summary

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Rollup is what a source of bundles (a GitRepo, a HelmOp) shows of its
// bundles: their summary, the worst state among them, the message that goes
// with it, and whether one of them could not be built.
type Rollup struct {
	Summary   fleet.BundleSummary
	State     fleet.BundleState
	Message   string
	BundleErr bool
}

// Display is what kubectl shows of a source of bundles: ready/desired bundle
// deployments, the worst state, and the first problem. A condition among
// failing that is False (the source cannot be read, say) is the problem
// shown, ahead of any bundle's.
func Display(conds []metav1.Condition, r Rollup, failing ...string) fleet.GitRepoDisplay {
	d := fleet.GitRepoDisplay{
		ReadyBundleDeployments: fmt.Sprintf("%d/%d", r.Summary.Ready, r.Summary.DesiredReady),
		State:                  string(r.State),
		Message:                r.Message,
		Error:                  r.State == fleet.ErrApplied || r.BundleErr,
	}
	for _, t := range failing {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionFalse {
			d.Message, d.Error = c.Message, true
			break
		}
	}
	return d
}
