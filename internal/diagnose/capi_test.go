package diagnose

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/capienroll"
)

// capiCluster is a Cluster API Cluster of fleet-default created an hour
// ago, its control plane initialized, with FleetAgentReady False for
// reason since the time given (no condition when reason is empty).
func capiCluster(name, reason, message string, since time.Duration) clusterv1.Cluster {
	c := clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name, UID: "uid-" + types.UID(name), CreationTimestamp: at(time.Hour)},
		Status: clusterv1.ClusterStatus{Phase: "Provisioned", Initialization: clusterv1.ClusterInitializationStatus{ControlPlaneInitialized: ptr.To(true)}}}
	if reason != "" {
		c.Status.Conditions = []metav1.Condition{{Type: capienroll.ConditionFleetAgentReady, Status: metav1.ConditionFalse,
			Reason: reason, Message: message, LastTransitionTime: at(since)}}
	}
	return c
}

func TestCAPINotEnrolled(t *testing.T) {
	now := metav1.NewTime(now)
	for _, tc := range []struct {
		name   string
		c      clusterv1.Cluster
		sev    Severity
		msg    []string
		action string
	}{
		{name: "kubeconfig Secret missing", c: capiCluster("nosecret", fleet.ReasonWaitingForControlPlane, "waiting for the kubeconfig Secret nosecret-kubeconfig", time.Hour),
			sev: Warning, msg: []string{"phase Provisioned", "not been enrolled for 1h0m0s", "WaitingForControlPlane: waiting for the kubeconfig Secret nosecret-kubeconfig"},
			action: "nosecret-kubeconfig in namespace fleet-default"},
		{name: "failed", c: capiCluster("failed", fleet.ReasonFailed, "KubeconfigInvalid: bad", 20*time.Minute),
			sev: Critical, msg: []string{"Failed: KubeconfigInvalid: bad", "(fleet Cluster fleet-default/failed)"}, action: "fix what the message names"},
		{name: "silent agent", c: capiCluster("silent", fleet.ReasonAgentSilent, "not since", time.Hour), sev: Warning, msg: []string{"AgentSilent"}, action: "agent-offline"},
		{name: "installing", c: capiCluster("installing", fleet.ReasonInstalling, "creating the fleet Cluster", time.Hour), sev: Warning,
			msg: []string{"Installing: creating the fleet Cluster"}, action: "Imported condition"},
		{name: "never looked at", c: capiCluster("unseen", "", "", 0), sev: Warning, msg: []string{"not been enrolled for 1h0m0s", "no FleetAgentReady condition"},
			action: "Cluster API enrolment on"},
		{name: "paused", c: func() clusterv1.Cluster {
			c := capiCluster("paused", "", "", 0)
			c.Spec.Paused = ptr.To(true)
			return c
		}(), sev: Info, msg: []string{"It is paused"}, action: "resume it"},
		{name: "being deleted", c: func() clusterv1.Cluster {
			c := capiCluster("dying", fleet.ReasonInstalling, "x", time.Hour)
			c.DeletionTimestamp = &now
			return c
		}(), sev: Info, msg: []string{"being deleted"}, action: "finalizers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := healthy()
			s.CAPIClusters = []clusterv1.Cluster{tc.c}
			if tc.c.Name == "failed" {
				fc := cluster("failed")
				fc.Annotations = map[string]string{capienroll.ClusterNameAnnotation: "failed"}
				s.Clusters = append(s.Clusters, fc)
			}
			got := capiNotEnrolled(s, Options{}.withDefaults())
			g.Expect(got).To(HaveLen(1))
			g.Expect(got[0].Object).To(Equal("Cluster.cluster.x-k8s.io fleet-default/" + tc.c.Name))
			g.Expect(got[0].Severity).To(Equal(tc.sev))
			for _, m := range tc.msg {
				g.Expect(got[0].Message).To(ContainSubstring(m))
			}
			g.Expect(got[0].Action).To(ContainSubstring(tc.action))
		})
	}
}

func TestCAPINotAFinding(t *testing.T) {
	notInitialized := capiCluster("young", fleet.ReasonWaitingForControlPlane, "waiting for the control plane to be initialized", time.Hour)
	notInitialized.Status.Initialization.ControlPlaneInitialized = nil
	enrolled := capiCluster("up", fleet.ReasonRegistered, "checks in", time.Hour)
	enrolled.Status.Conditions[0].Status = metav1.ConditionTrue
	optedOut := capiCluster("out", "", "", 0)
	optedOut.Labels = map[string]string{capienroll.EnrollLabel: "false"}
	unenrolled := capiCluster("gone", fleet.ReasonUnenrolled, "the fleet Cluster was deleted", time.Hour)
	recent := capiCluster("recent", fleet.ReasonInstalling, "creating", 5*time.Minute)
	// The control plane was initialized a minute ago, FleetAgentReady has
	// been False since before: the grace runs from the initialization.
	justInitialized := capiCluster("justup", fleet.ReasonWaitingForControlPlane, "waiting for the kubeconfig Secret", time.Hour)
	justInitialized.Status.Conditions = append(justInitialized.Status.Conditions, metav1.Condition{
		Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue, LastTransitionTime: at(time.Minute)})
	for _, c := range []clusterv1.Cluster{notInitialized, enrolled, optedOut, unenrolled, recent, justInitialized} {
		t.Run(c.Name, func(t *testing.T) {
			s := healthy()
			s.CAPIClusters = []clusterv1.Cluster{c}
			NewWithT(t).Expect(capiNotEnrolled(s, Options{}.withDefaults())).To(BeEmpty())
		})
	}
}

func TestCAPINotRunWhenAbsentOrForbidden(t *testing.T) {
	g := NewWithT(t)
	s := healthy()
	s.CAPIClusters = []clusterv1.Cluster{capiCluster("nosecret", fleet.ReasonFailed, "x", time.Hour)}
	s.Absent = []string{KindCAPICluster}
	findings, skipped := Analyze(s, Options{})
	g.Expect(findings).To(BeEmpty())
	g.Expect(skipped).To(ConsistOf("capi-not-enrolled (no clusters.cluster.x-k8s.io served or dumped)"))
	s.Absent, s.Unreadable = nil, []string{KindCAPICluster}
	_, skipped = Analyze(s, Options{})
	g.Expect(skipped).To(ConsistOf("capi-not-enrolled (may not list clusters.cluster.x-k8s.io)"))
	s.Unreadable = nil
	findings, skipped = Analyze(s, Options{})
	g.Expect(skipped).To(BeEmpty())
	g.Expect(findings).To(ContainElement(HaveField("Check", CheckCAPINotEnrolled)))
}
