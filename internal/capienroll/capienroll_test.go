package capienroll_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/internal/capienroll"
)

func TestWireNamesAreTheEnrolments(t *testing.T) {
	NewWithT(t).Expect([]string{capienroll.ConditionFleetAgentReady, capienroll.EnrollLabel, capienroll.UnenrolledAnnotation,
		capienroll.ClusterNameAnnotation, capienroll.ClusterUIDAnnotation}).To(Equal([]string{capi.ConditionFleetAgentReady,
		capi.EnrollLabel, capi.UnenrolledAnnotation, capi.CAPIClusterNameAnnotation, capi.CAPIClusterUIDAnnotation}))
}

func TestWhyNot(t *testing.T) {
	now := metav1.Now()
	cond := func(reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: capienroll.ConditionFleetAgentReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg}}
	}
	for _, tc := range []struct {
		name     string
		c        clusterv1.Cluster
		want     string
		optedOut bool
	}{
		{name: "condition", c: clusterv1.Cluster{Status: clusterv1.ClusterStatus{Conditions: cond(fleet.ReasonFailed, "Applied: no route")}},
			want: "Failed: Applied: no route"},
		{name: "deleted", c: clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now},
			Status: clusterv1.ClusterStatus{Conditions: cond(fleet.ReasonFailed, "x")}}, want: "being deleted"},
		{name: "paused", c: clusterv1.Cluster{Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}, want: "It is paused"},
		{name: "paused by annotation", c: clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{clusterv1.PausedAnnotation: ""}}},
			want: "It is paused"},
		{name: "opted out", c: clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{capienroll.EnrollLabel: "false"}}},
			want: "opted out", optedOut: true},
		{name: "unenrolled", c: clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{capienroll.UnenrolledAnnotation: "t"}}},
			want: "un-enrolled", optedOut: true},
		{name: "unenrolled condition", c: clusterv1.Cluster{Status: clusterv1.ClusterStatus{Conditions: cond(fleet.ReasonUnenrolled, "gone")}},
			want: "Unenrolled: gone", optedOut: true},
		{name: "reason only", c: clusterv1.Cluster{Status: clusterv1.ClusterStatus{Conditions: cond(fleet.ReasonInstalling, "")}}, want: "Installing"},
		{name: "never looked at", want: "has no FleetAgentReady condition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(capienroll.WhyNot(&tc.c)).To(ContainSubstring(tc.want))
			g.Expect(capienroll.OptedOut(&tc.c)).To(Equal(tc.optedOut))
		})
	}
}

func TestInitialized(t *testing.T) {
	g := NewWithT(t)
	c := &clusterv1.Cluster{}
	g.Expect(capienroll.Initialized(c)).To(BeFalse())
	c.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	g.Expect(capienroll.Initialized(c)).To(BeTrue())
	c = &clusterv1.Cluster{Status: clusterv1.ClusterStatus{Conditions: []metav1.Condition{
		{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue}}}}
	g.Expect(capienroll.Initialized(c)).To(BeTrue())
}
