package controller

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitfleet/fleet/agent/deployer"
	"github.com/gitfleet/fleet/agent/monitor"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
)

func rel(id string, version int, status release.Status) *release.Release {
	return &release.Release{Name: "app", Namespace: "ns", Version: version, Info: &release.Info{Status: status, Description: "boom"},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Annotations: map[string]string{deployer.DeploymentIDAnnotation: id, deployer.SyncGenerationAnnotation: "2"}}}}
}

func TestComputeStatus(t *testing.T) {
	notReady := &monitor.Result{Ready: false, NonModified: true,
		NonReady: []fleet.NonReadyStatus{{Kind: "Deployment", Namespace: "ns", Name: "web", Summary: "0/1 available"}}}
	modified := &monitor.Result{Ready: true, NonModified: false,
		Modified: []fleet.ModifiedStatus{{Kind: "ConfigMap", Namespace: "ns", Name: "cm", Patch: `{"data":{"a":"b"}}`}}}
	cases := []struct {
		name      string
		id        string
		paused    bool
		state     *releaseState
		deployErr error
		waiting   []string
		monitored *monitor.Result
		want      fleet.BundleState
		message   string
	}{
		{name: "ready", id: "s-1:a", state: &releaseState{deployed: rel("s-1:a", 1, release.StatusDeployed)},
			monitored: &monitor.Result{Ready: true, NonModified: true}, want: fleet.Ready},
		{name: "not ready", id: "s-1:a", state: &releaseState{deployed: rel("s-1:a", 1, release.StatusDeployed)},
			monitored: notReady, want: fleet.NotReady, message: "Deployment ns/web: 0/1 available"},
		{name: "modified", id: "s-1:a", state: &releaseState{deployed: rel("s-1:a", 1, release.StatusDeployed)},
			monitored: modified, want: fleet.Modified, message: `ConfigMap ns/cm is modified: {"data":{"a":"b"}}`},
		{name: "failed upgrade keeps the old release", id: "s-2:b",
			state:     &releaseState{deployed: rel("s-1:a", 1, release.StatusDeployed), last: rel("s-2:b", 2, release.StatusFailed)},
			deployErr: errors.New(`ConfigMap "Bad_Name" is invalid`), monitored: &monitor.Result{Ready: true, NonModified: true},
			want: fleet.ErrApplied, message: `ConfigMap "Bad_Name" is invalid`},
		{name: "waiting for a dependency", id: "s-2:b", state: &releaseState{}, waiting: []string{"db (NotReady)"},
			want: fleet.WaitApplied, message: "waiting for db (NotReady)"},
		{name: "paused", id: "s-2:b", paused: true, state: &releaseState{deployed: rel("s-1:a", 1, release.StatusDeployed)},
			monitored: &monitor.Result{Ready: true, NonModified: true}, want: fleet.WaitApplied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			bd := &fleet.BundleDeployment{Spec: fleet.BundleDeploymentSpec{DeploymentID: tc.id, StagedDeploymentID: tc.id, Paused: tc.paused}}
			s := &scope{bd: bd, state: tc.state, deployErr: tc.deployErr, waiting: tc.waiting, monitored: tc.monitored}
			computeStatus(s, nil)
			g.Expect(summary.State(bd)).To(Equal(tc.want))
			g.Expect(bd.Status.Display.State).To(Equal(string(tc.want)))
			if tc.message != "" {
				g.Expect(summary.Message(bd)).To(Equal(tc.message))
			}
			ready := meta.FindStatusCondition(bd.Status.Conditions, fleet.ConditionReady)
			g.Expect(ready.Status == metav1.ConditionTrue).To(Equal(tc.want == fleet.Ready))
			if tc.state.deployed != nil {
				g.Expect(bd.Status.Release).To(Equal(deployer.Display(tc.state.deployed)))
				g.Expect(*bd.Status.SyncGeneration).To(Equal(int64(2)))
			}
		})
	}
}

func TestUnmetDependencies(t *testing.T) {
	bd := func(name string, labels map[string]string, ready bool) fleet.BundleDeployment {
		l := map[string]string{fleet.BundleNameLabel: name, fleet.BundleNamespaceLabel: "fleet-default"}
		for k, v := range labels {
			l[k] = v
		}
		b := fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-1:a", StagedDeploymentID: "s-1:a"}}
		if ready {
			b.Status = fleet.BundleDeploymentStatus{AppliedDeploymentID: "s-1:a", Ready: true, NonModified: true}
		}
		return b
	}
	all := []fleet.BundleDeployment{bd("db", map[string]string{"tier": "data"}, true), bd("cache", map[string]string{"tier": "data"}, false)}
	cases := []struct {
		name string
		refs []fleet.BundleRef
		want []string
	}{
		{name: "ready by name", refs: []fleet.BundleRef{{Name: "db"}}},
		{name: "not ready by name", refs: []fleet.BundleRef{{Name: "cache"}}, want: []string{"cache (WaitApplied)"}},
		{name: "accepted state", refs: []fleet.BundleRef{{Name: "cache", AcceptedStates: []fleet.BundleState{fleet.WaitApplied}}}},
		{name: "absent", refs: []fleet.BundleRef{{Name: "queue"}}, want: []string{"queue (not deployed to this cluster)"}},
		{name: "selector", refs: []fleet.BundleRef{{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "data"}}}},
			want: []string{"cache (WaitApplied)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			app := bd("app", nil, false)
			app.Spec.DependsOn = tc.refs
			g.Expect(UnmetDependencies(&app, all)).To(Equal(tc.want))
		})
	}
}
