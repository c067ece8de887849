package bundledeployment

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitfleet/fleet/agent/monitor"
	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/summary"
)

func rel(id string, version int, status release.Status) *release.Release {
	return &release.Release{Name: "app", Namespace: "ns", Version: version, Info: &release.Info{Status: status, Description: "boom"},
		Chart: &release.Chart{Metadata: &release.Metadata{Annotations: map[string]string{fleet.DeploymentIDAnnotation: id, fleet.SyncGenerationAnnotation: "2"}}}}
}

func TestComputeStatus(t *testing.T) {
	notReady := &monitor.Result{Ready: false, NonModified: true,
		NonReady: []fleet.NonReadyStatus{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "web", Summary: fleet.Summary{State: "updating", Transitioning: true, Message: []string{"0/1 available"}}}}}
	modified := &monitor.Result{Ready: true, NonModified: false,
		Modified: []fleet.ModifiedStatus{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "cm", Patch: `{"data":{"a":"b"}}`}}}
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
		// reason is the Ready condition's reason, when the case checks it.
		reason string
	}{
		{name: "ready", id: "s-1:a", state: &releaseState{deployed: rel("s-1:a", 1, release.StatusDeployed)},
			monitored: &monitor.Result{Ready: true, NonModified: true}, want: fleet.Ready},
		{name: "not ready", id: "s-1:a", state: &releaseState{deployed: rel("s-1:a", 1, release.StatusDeployed)},
			monitored: notReady, want: fleet.NotReady, message: "deployment.apps ns/web 0/1 available"},
		{name: "modified", id: "s-1:a", state: &releaseState{deployed: rel("s-1:a", 1, release.StatusDeployed)},
			monitored: modified, want: fleet.Modified, message: `configmap.v1 ns/cm modified {"data":{"a":"b"}}`},
		{name: "failed upgrade keeps the old release", id: "s-2:b",
			state:     &releaseState{deployed: rel("s-1:a", 1, release.StatusDeployed), last: rel("s-2:b", 2, release.StatusFailed)},
			deployErr: outcome.Stallf(fleet.ReasonInstallFailed, `ConfigMap "Bad_Name" is invalid`), monitored: &monitor.Result{Ready: true, NonModified: true},
			want: fleet.ErrApplied, message: `ConfigMap "Bad_Name" is invalid`, reason: fleet.ReasonInstallFailed},
		{name: "transient failure of a first install", id: "s-1:a", state: &releaseState{},
			deployErr: errors.New("connection refused"), want: fleet.ErrApplied, message: "connection refused", reason: fleet.ReasonError},
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
			if tc.want == fleet.Ready {
				g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
			} else {
				g.Expect(ready.Status).NotTo(Equal(metav1.ConditionTrue))
			}
			if tc.reason != "" {
				g.Expect(ready.Reason).To(Equal(tc.reason))
			}
			if tc.state.deployed != nil {
				g.Expect(bd.Status.Release).To(Equal(release.Display(tc.state.deployed)))
				g.Expect(*bd.Status.SyncGeneration).To(Equal(int64(2)))
			}
		})
	}
}

func TestInstalledCondition(t *testing.T) {
	cases := []struct {
		name             string
		deployed, last   *release.Release
		status           metav1.ConditionStatus
		reason, contains string
	}{
		{name: "nothing", status: metav1.ConditionFalse, reason: fleet.ReasonNotInstalled},
		{name: "deployed", deployed: rel("s-1:a", 1, release.StatusDeployed), last: rel("s-2:b", 2, release.StatusFailed),
			status: metav1.ConditionTrue, reason: fleet.ReasonInstalled, contains: "ns/app:1"},
		{name: "only a failed revision", last: rel("s-1:a", 1, release.StatusFailed),
			status: metav1.ConditionFalse, reason: fleet.ReasonFailed, contains: "is failed: boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := installedCondition(tc.deployed, tc.last)
			g.Expect(c.Type).To(Equal(fleet.ConditionInstalled))
			g.Expect(c.Status).To(Equal(tc.status))
			g.Expect(c.Reason).To(Equal(tc.reason))
			g.Expect(c.Message).To(ContainSubstring(tc.contains))
		})
	}
}

func TestDeployedCondition(t *testing.T) {
	failed := &metav1.Condition{Type: fleet.ConditionDeployed, Status: metav1.ConditionFalse, Reason: fleet.ReasonInstallFailed, Message: "bad"}
	cases := []struct {
		name      string
		spec      fleet.BundleDeploymentSpec
		applied   string
		prev      *metav1.Condition
		waiting   []string
		deployErr error
		status    metav1.ConditionStatus
		reason    string
		message   string
	}{
		{name: "applied", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-1:a"}, applied: "s-1:a",
			status: metav1.ConditionTrue, reason: fleet.ReasonDeployed},
		{name: "a stall carries its reason", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-2:b"}, applied: "s-1:a",
			deployErr: outcome.Stallf(fleet.ReasonInvalidBundle, "no chart"), status: metav1.ConditionFalse, reason: fleet.ReasonInvalidBundle, message: "no chart"},
		{name: "a transient failure is an Error", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-2:b"},
			deployErr: errors.New("connection refused"), status: metav1.ConditionFalse, reason: fleet.ReasonError, message: "connection refused"},
		{name: "paused", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-2:b", Paused: true}, applied: "s-1:a",
			status: metav1.ConditionUnknown, reason: fleet.ReasonPaused, message: "paused: changes are not deployed"},
		{name: "outside the deployment window", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-2:b", OffSchedule: true}, applied: "s-1:a",
			status: metav1.ConditionUnknown, reason: fleet.ReasonOffSchedule, message: "outside the cluster's deployment window: deploymentID s-2:b waits for the next window"},
		{name: "applied, outside the window", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-1:a", OffSchedule: true}, applied: "s-1:a",
			status: metav1.ConditionTrue, reason: fleet.ReasonDeployed},
		{name: "waiting", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-2:b"}, waiting: []string{"db (NotReady)", "queue (not deployed to this cluster)"},
			status: metav1.ConditionUnknown, reason: fleet.ReasonWaitingForDeps, message: "waiting for db (NotReady), queue (not deployed to this cluster)"},
		{name: "the last failure stays until something changes", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-2:b"}, prev: failed,
			status: metav1.ConditionFalse, reason: fleet.ReasonInstallFailed, message: "bad"},
		{name: "not tried yet", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-2:b"},
			status: metav1.ConditionUnknown, reason: fleet.ReasonDeploying},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := deployedCondition(tc.spec, tc.applied, tc.prev, tc.waiting, tc.deployErr)
			g.Expect(c).To(Equal(metav1.Condition{Type: fleet.ConditionDeployed, Status: tc.status, Reason: tc.reason, Message: tc.message}))
		})
	}
}

func TestMonitoredCondition(t *testing.T) {
	cases := []struct {
		name       string
		deployed   bool
		monitored  *monitor.Result
		monitorErr error
		keep       bool
		status     metav1.ConditionStatus
		reason     string
		report     bool
	}{
		{name: "monitored", deployed: true, monitored: &monitor.Result{Ready: true}, status: metav1.ConditionTrue, reason: fleet.ReasonMonitored, report: true},
		{name: "could not look", deployed: true, monitorErr: errors.New("timeout"), status: metav1.ConditionFalse, reason: fleet.ReasonError},
		{name: "nothing deployed", status: metav1.ConditionUnknown, reason: fleet.ReasonNothingToMonitor, report: true},
		{name: "a deploy failed before the monitor ran", deployed: true, keep: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c, res := monitoredCondition(tc.deployed, tc.monitored, tc.monitorErr)
			if tc.keep {
				g.Expect(c).To(BeNil())
				g.Expect(res).To(BeNil())
				return
			}
			g.Expect(c.Status).To(Equal(tc.status))
			g.Expect(c.Reason).To(Equal(tc.reason))
			g.Expect(res != nil).To(Equal(tc.report))
		})
	}
}

func TestReadyCondition(t *testing.T) {
	spec := fleet.BundleDeploymentSpec{DeploymentID: "s-2:b"}
	applied := fleet.BundleDeploymentStatus{Release: "ns/app:2", AppliedDeploymentID: "s-2:b", Ready: true, NonModified: true}
	with := func(change func(*fleet.BundleDeploymentStatus)) *fleet.BundleDeploymentStatus {
		st := applied
		change(&st)
		return &st
	}
	cases := []struct {
		name      string
		spec      fleet.BundleDeploymentSpec
		st        *fleet.BundleDeploymentStatus
		waiting   []string
		deployErr error
		status    metav1.ConditionStatus
		reason    string
		message   string
	}{
		{name: "ready", spec: spec, st: &applied, status: metav1.ConditionTrue, reason: fleet.ReasonReady},
		{name: "stalled deploy", spec: spec, st: &applied, deployErr: outcome.Stallf(fleet.ReasonInstallFailed, "template: boom"),
			status: metav1.ConditionFalse, reason: fleet.ReasonInstallFailed, message: "template: boom"},
		{name: "waiting", spec: spec, st: &fleet.BundleDeploymentStatus{}, waiting: []string{"db (NotReady)"},
			status: metav1.ConditionFalse, reason: fleet.ReasonWaitingForDeps, message: "waiting for db (NotReady)"},
		{name: "not installed", spec: spec, st: &fleet.BundleDeploymentStatus{}, status: metav1.ConditionFalse, reason: fleet.ReasonNotInstalled},
		{name: "not installed, paused", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-2:b", Paused: true}, st: &fleet.BundleDeploymentStatus{},
			status: metav1.ConditionFalse, reason: fleet.ReasonPaused},
		{name: "not ready", spec: spec, st: with(func(st *fleet.BundleDeploymentStatus) {
			st.Ready = false
			st.NonReadyStatus = []fleet.NonReadyStatus{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Namespace: "ns", Summary: fleet.Summary{State: "updating", Message: []string{"0/1"}}}, {Kind: "Job", Name: "j"}}
		}), status: metav1.ConditionFalse, reason: fleet.ReasonNotReady, message: "deployment.apps ns/web 0/1 (and 1 more)"},
		{name: "modified", spec: spec, st: with(func(st *fleet.BundleDeploymentStatus) {
			st.NonModified = false
			st.ModifiedStatus = []fleet.ModifiedStatus{{APIVersion: "batch/v1", Kind: "Job", Name: "x", Namespace: "default", Create: true}}
		}), status: metav1.ConditionFalse, reason: fleet.ReasonModified, message: "job.batch default/x missing"},
		{name: "older deploymentID applied", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-3:c"}, st: &applied,
			status: metav1.ConditionFalse, reason: fleet.ReasonWaitApplied, message: "deploymentID s-3:c is not applied yet"},
		{name: "a new deploymentID waits for the deployment window", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-3:c", OffSchedule: true}, st: &applied,
			status: metav1.ConditionFalse, reason: fleet.ReasonOffSchedule, message: "outside the cluster's deployment window: deploymentID s-3:c waits for the next window"},
		{name: "not installed, outside the window", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-2:b", OffSchedule: true}, st: &fleet.BundleDeploymentStatus{},
			status: metav1.ConditionFalse, reason: fleet.ReasonOffSchedule, message: "outside the cluster's deployment window: deploymentID s-2:b waits for the next window"},
		{name: "applied and ready outside the window", spec: fleet.BundleDeploymentSpec{DeploymentID: "s-2:b", OffSchedule: true}, st: &applied,
			status: metav1.ConditionTrue, reason: fleet.ReasonReady},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := readyCondition(tc.spec, tc.st, tc.waiting, tc.deployErr)
			g.Expect(c).To(Equal(metav1.Condition{Type: fleet.ConditionReady, Status: tc.status, Reason: tc.reason, Message: tc.message}))
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
