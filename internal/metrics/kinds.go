package metrics

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
)

// The kinds whose states are counted. Their states are what kubectl shows
// (status.display.state), and a BundleDeployment's state as summaries count
// it.
var (
	GitRepos = &Kind{
		Name: "GitRepo", Metric: "fleet_gitrepos", Namespaced: true, States: bundleStates,
		Help: "GitRepos by namespace and state (the worst state of their BundleDeployments).",
		New:  func() client.Object { return &fleet.GitRepo{} },
		State: func(o client.Object) string {
			return o.(*fleet.GitRepo).Status.Display.State
		},
		EventState: func(o client.Object) string { return o.(*fleet.GitRepo).Status.Display.State },
		Note:       func(o client.Object) string { return o.(*fleet.GitRepo).Status.Display.Message },
	}
	Bundles = &Kind{
		Name: "Bundle", Metric: "fleet_bundles", Namespaced: true, States: bundleStates,
		Help:  "Bundles by namespace and state (the worst state of their BundleDeployments).",
		New:   func() client.Object { return &fleet.Bundle{} },
		State: func(o client.Object) string { return o.(*fleet.Bundle).Status.Display.State },
		// Only a state its deployments explain: a failure of the bundle
		// controller itself shows as ErrApplied too, but its own event
		// (internal/outcome) already tells of it.
		EventState: func(o client.Object) string {
			b := o.(*fleet.Bundle)
			if b.Status.Display.State != string(summary.WorstState(b.Status.Summary)) {
				return ""
			}
			return b.Status.Display.State
		},
		Note: func(o client.Object) string { return readyMessage(o.(*fleet.Bundle).Status.Conditions) },
	}
	BundleDeployments = &Kind{
		Name: "BundleDeployment", Metric: "fleet_bundledeployments", States: bundleStates,
		Help:  "BundleDeployments by state (as Bundle summaries count them).",
		New:   func() client.Object { return &fleet.BundleDeployment{} },
		State: func(o client.Object) string { return string(summary.State(o.(*fleet.BundleDeployment))) },
	}
	Clusters = &Kind{
		Name: "Cluster", Metric: "fleet_clusters", Namespaced: true,
		States: append([]string{fleet.ClusterStateWaitCheckIn, fleet.ClusterStateOffline}, bundleStates...),
		Help:   "Clusters by namespace and state (WaitCheckIn, Offline, or the worst state of their BundleDeployments).",
		New:    func() client.Object { return &fleet.Cluster{} },
		State: func(o client.Object) string {
			return o.(*fleet.Cluster).Status.Display.State
		},
		EventState: func(o client.Object) string { return o.(*fleet.Cluster).Status.Display.State },
		Note:       func(o client.Object) string { return readyMessage(o.(*fleet.Cluster).Status.Conditions) },
	}
)

// Kinds are the kinds whose states are counted.
func Kinds() []*Kind { return []*Kind{GitRepos, Bundles, BundleDeployments, Clusters} }

func readyMessage(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, fleet.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}
