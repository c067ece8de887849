package capi

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

func fleetCluster(reason, message string) *fleet.Cluster {
	c := &fleet.Cluster{}
	if reason != "" {
		status := metav1.ConditionFalse
		if reason == fleet.ReasonApplied || reason == fleet.ReasonAgentRegistered {
			status = metav1.ConditionTrue
		}
		c.Status.Conditions = []metav1.Condition{{Type: fleet.ConditionImported, Status: status, Reason: reason, Message: message}}
	}
	return c
}

// now is the clock of the check-in cases.
var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// checkingIn observes fc whose agent last checked in ago before now.
func checkingIn(fc *fleet.Cluster, ago time.Duration) Observed {
	return Observed{Fleet: fc, CheckIn: now.Add(-ago), Now: now, StaleAfter: 15 * time.Minute}
}

func TestNextCheckInCheck(t *testing.T) {
	g := NewWithT(t)
	g.Expect(NextCheckInCheck(checkingIn(fleetCluster("", ""), time.Minute))).To(Equal(14*time.Minute+time.Second),
		"looked at again when the check-in would grow stale")
	g.Expect(NextCheckInCheck(checkingIn(fleetCluster("", ""), 20*time.Minute))).To(BeZero(), "stale already: a check-in wakes it")
	g.Expect(NextCheckInCheck(Observed{})).To(BeZero())
}

func TestFleetAgentReadyCondition(t *testing.T) {
	deleting := fleetCluster(fleet.ReasonAgentRegistered, "ok")
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	for name, tc := range map[string]struct {
		in      Observed
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		"not initialized": {in: Observed{SecretExists: true}, status: metav1.ConditionFalse, reason: fleet.ReasonWaitingForControlPlane,
			message: "waiting for the control plane to be initialized"},
		"no secret yet": {in: Observed{ControlPlaneInitialized: true, SecretName: "c-kubeconfig"}, status: metav1.ConditionFalse,
			reason: fleet.ReasonWaitingForControlPlane, message: "waiting for the kubeconfig Secret c-kubeconfig"},
		"about to create": {in: Observed{ControlPlaneInitialized: true, SecretExists: true}, status: metav1.ConditionFalse, reason: fleet.ReasonInstalling},
		"created":         {in: Observed{Fleet: fleetCluster("", "")}, status: metav1.ConditionFalse, reason: fleet.ReasonInstalling},
		"applied": {in: Observed{Fleet: fleetCluster(fleet.ReasonApplied, "waiting for the agent")}, status: metav1.ConditionFalse,
			reason: fleet.ReasonInstalling, message: "waiting for the agent"},
		"adopting": {in: Observed{Fleet: fleetCluster(fleet.ReasonAdopting, "taking over")}, status: metav1.ConditionFalse, reason: fleet.ReasonInstalling},
		"registered, checking in": {in: checkingIn(fleetCluster(fleet.ReasonAgentRegistered, "checks in"), time.Minute), status: metav1.ConditionTrue,
			reason: fleet.ReasonRegistered, message: "the fleet agent checks in (last check-in within 15m0s)"},
		"registered, never checked in": {in: Observed{Fleet: fleetCluster(fleet.ReasonAgentRegistered, "ok")},
			status: metav1.ConditionFalse, reason: fleet.ReasonInstalling, message: "waiting for the fleet agent to check in"},
		"workload API unreachable from the manager, the agent checking in": {
			in:     checkingIn(fleetCluster(fleet.ReasonClusterUnreachable, "connection refused"), 14*time.Minute),
			status: metav1.ConditionTrue, reason: fleet.ReasonRegistered},
		"the agent silent since": {in: checkingIn(fleetCluster(fleet.ReasonAgentRegistered, "ok"), 20*time.Minute),
			status: metav1.ConditionFalse, reason: fleet.ReasonAgentSilent,
			message: "the fleet agent has not checked in since 2026-01-02T02:44:05Z (more than 15m0s)"},
		"the agent silent, and unreachable": {in: checkingIn(fleetCluster(fleet.ReasonClusterUnreachable, "connection refused"), 20*time.Minute),
			status: metav1.ConditionFalse, reason: fleet.ReasonAgentSilent,
			message: "the fleet agent has not checked in since 2026-01-02T02:44:05Z (more than 15m0s); ClusterUnreachable: connection refused"},
		"bad kubeconfig": {in: Observed{Fleet: fleetCluster(fleet.ReasonKubeconfigInvalid, "kubeconfig is not valid YAML")},
			status: metav1.ConditionFalse, reason: fleet.ReasonFailed, message: "KubeconfigInvalid: kubeconfig is not valid YAML"},
		"unreachable": {in: Observed{Fleet: fleetCluster(fleet.ReasonClusterUnreachable, "connection refused")},
			status: metav1.ConditionFalse, reason: fleet.ReasonFailed, message: "ClusterUnreachable: connection refused"},
		"name taken": {in: Observed{ControlPlaneInitialized: true, SecretExists: true, Err: outcome.Stallf(fleet.ReasonFailed, "fleet Cluster x exists")},
			status: metav1.ConditionFalse, reason: fleet.ReasonFailed, message: "fleet Cluster x exists"},
		"fleet cluster deleted by hand": {in: Observed{Fleet: deleting}, status: metav1.ConditionFalse, reason: fleet.ReasonInstalling},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := FleetAgentReadyCondition(tc.in, 3)
			g.Expect(c.Type).To(Equal(ConditionFleetAgentReady))
			g.Expect(c.Status).To(Equal(tc.status))
			g.Expect(c.Reason).To(Equal(tc.reason))
			g.Expect(c.ObservedGeneration).To(Equal(int64(3)))
			if tc.message != "" {
				g.Expect(c.Message).To(Equal(tc.message))
			}
		})
	}
}

func TestConditionChangedAndEvent(t *testing.T) {
	cond := func(reason, message string, generation int64) *metav1.Condition {
		status := metav1.ConditionFalse
		if reason == fleet.ReasonRegistered {
			status = metav1.ConditionTrue
		}
		return &metav1.Condition{Type: ConditionFleetAgentReady, Status: status, Reason: reason, Message: message, ObservedGeneration: generation}
	}
	waiting := cond(fleet.ReasonWaitingForControlPlane, "waiting", 1)
	for name, tc := range map[string]struct {
		before, after *metav1.Condition
		changed       bool
		event         string
	}{
		"nothing, and none wanted":   {},
		"first wait is no news":      {after: waiting, changed: true},
		"same again":                 {before: waiting, after: cond(fleet.ReasonWaitingForControlPlane, "waiting", 1)},
		"same for a newer spec":      {before: waiting, after: cond(fleet.ReasonWaitingForControlPlane, "waiting", 2), changed: true},
		"progress":                   {before: waiting, after: cond(fleet.ReasonInstalling, "creating", 1), changed: true, event: corev1.EventTypeNormal},
		"new message":                {before: cond(fleet.ReasonInstalling, "a", 1), after: cond(fleet.ReasonInstalling, "b", 1), changed: true, event: corev1.EventTypeNormal},
		"failure":                    {before: waiting, after: cond(fleet.ReasonFailed, "name taken", 1), changed: true, event: corev1.EventTypeWarning},
		"failure on the first look":  {after: cond(fleet.ReasonFailed, "name taken", 1), changed: true, event: corev1.EventTypeWarning},
		"registered":                 {before: cond(fleet.ReasonInstalling, "a", 1), after: cond(fleet.ReasonRegistered, "ok", 1), changed: true, event: corev1.EventTypeNormal},
		"released: removed silently": {before: waiting, changed: true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(conditionChanged(tc.before, tc.after)).To(Equal(tc.changed))
			g.Expect(conditionEvent(tc.before, tc.after)).To(Equal(tc.event))
		})
	}
}

func TestStatusOf(t *testing.T) {
	g := NewWithT(t)
	b, err := json.Marshal(statusOf(nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal("{}"), "no condition: the entry applied before goes")
	c := FleetAgentReadyCondition(Observed{}, 1)
	g.Expect(statusOf(&c).Conditions).To(Equal([]metav1.Condition{c}))
}

func TestControlPlaneInitialized(t *testing.T) {
	g := NewWithT(t)
	c := &clusterv1.Cluster{}
	g.Expect(ControlPlaneInitialized(c)).To(BeFalse())
	c.Status.Initialization.ControlPlaneInitialized = ptr.To(false)
	g.Expect(ControlPlaneInitialized(c)).To(BeFalse())
	c.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	g.Expect(ControlPlaneInitialized(c)).To(BeTrue())

	byCondition := &clusterv1.Cluster{}
	byCondition.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue}}
	g.Expect(ControlPlaneInitialized(byCondition)).To(BeTrue())
	byCondition.Status.Conditions[0].Status = metav1.ConditionFalse
	g.Expect(ControlPlaneInitialized(byCondition)).To(BeFalse())
}

func TestPausedAndOptedOut(t *testing.T) {
	g := NewWithT(t)
	c := &clusterv1.Cluster{}
	g.Expect(Paused(c)).To(BeFalse())
	c.Spec.Paused = ptr.To(true)
	g.Expect(Paused(c)).To(BeTrue())
	c.Spec.Paused = ptr.To(false)
	c.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	g.Expect(Paused(c)).To(BeTrue())

	g.Expect(OptedOut(&clusterv1.Cluster{}, nil)).To(BeFalse())
	g.Expect(OptedOut(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{EnrollLabel: "false"}}}, nil)).To(BeTrue())
	g.Expect(OptedOut(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{EnrollLabel: "true"}}}, nil)).To(BeFalse())
	g.Expect(OptedOut(&clusterv1.Cluster{}, map[string]string{EnrollLabel: "false"})).To(BeTrue())
}

func TestDesiredLabels(t *testing.T) {
	g := NewWithT(t)
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Labels: map[string]string{
		"env": "prod", EnrollLabel: "true", ClusterClassLabel: "spoofed",
		clusterv1.ClusterNameLabel:        "x",
		"topology.cluster.x-k8s.io/owned": "",
		"fleet.cattle.io/agent-namespace": "spoofed",
		"example.com/team":                "blue",
		"notcluster.x-k8s.io/kept":        "yes",
	}}}
	g.Expect(DesiredLabels(c)).To(Equal(map[string]string{"env": "prod", "example.com/team": "blue", "notcluster.x-k8s.io/kept": "yes"}),
		"Cluster API's and fleet's own keys are not copied")
	c.Spec.Topology.ClassRef.Name = "quick-start"
	g.Expect(DesiredLabels(c)).To(Equal(map[string]string{"env": "prod", "example.com/team": "blue", "notcluster.x-k8s.io/kept": "yes",
		ClusterClassLabel: "quick-start", ClusterClassNamespaceLabel: "tenant-a"}), "the class namespace defaults to the cluster's")
	c.Spec.Topology.ClassRef.Namespace = "classes"
	g.Expect(DesiredLabels(c)).To(HaveKeyWithValue(ClusterClassNamespaceLabel, "classes"))
	g.Expect(DesiredLabels(&clusterv1.Cluster{})).To(BeEmpty())
}

func TestSelected(t *testing.T) {
	g := NewWithT(t)
	optIn := labels.SelectorFromSet(labels.Set{"fleet": "yes"})
	c := func(l map[string]string) *clusterv1.Cluster {
		return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Labels: l}}
	}
	g.Expect(Selected(c(nil), nil, nil, nil)).To(BeTrue(), "opt-out mode enrolls every cluster")
	g.Expect(Selected(c(map[string]string{EnrollLabel: "false"}), nil, nil, nil)).To(BeFalse())
	g.Expect(Selected(c(nil), map[string]string{EnrollLabel: "false"}, nil, nil)).To(BeFalse())
	g.Expect(Selected(c(nil), nil, optIn, nil)).To(BeFalse(), "opt-in: unlabelled clusters stay out")
	g.Expect(Selected(c(map[string]string{"fleet": "yes"}), nil, optIn, nil)).To(BeTrue())
	g.Expect(Selected(c(map[string]string{"fleet": "yes", EnrollLabel: "false"}), nil, optIn, nil)).To(BeFalse(), "the opt-out label wins")
	g.Expect(Selected(c(nil), map[string]string{"fleet": "yes"}, nil, optIn)).To(BeTrue(), "namespace selector")
	g.Expect(Selected(c(nil), map[string]string{"fleet": "no"}, nil, optIn)).To(BeFalse())
	g.Expect(Selected(c(map[string]string{"fleet": "yes"}), map[string]string{}, optIn, optIn)).To(BeFalse(), "both must match")
}

func TestSyncLabels(t *testing.T) {
	for name, tc := range map[string]struct {
		current     map[string]string
		managed     []string
		desired     map[string]string
		wantLabels  map[string]string
		wantManaged []string
	}{
		"first copy": {
			desired:    map[string]string{"env": "dev", "region": "eu"},
			wantLabels: map[string]string{"env": "dev", "region": "eu"}, wantManaged: []string{"env", "region"},
		},
		"value changed": {
			current: map[string]string{"env": "dev"}, managed: []string{"env"}, desired: map[string]string{"env": "prod"},
			wantLabels: map[string]string{"env": "prod"}, wantManaged: []string{"env"},
		},
		"removed upstream": {
			current: map[string]string{"env": "dev", "region": "eu"}, managed: []string{"env", "region"}, desired: map[string]string{"env": "dev"},
			wantLabels: map[string]string{"env": "dev"}, wantManaged: []string{"env"},
		},
		"labels of others stay": {
			current: map[string]string{"env": "dev", "team": "a"}, managed: []string{"env"}, desired: map[string]string{},
			wantLabels: map[string]string{"team": "a"}, wantManaged: []string{},
		},
		"a key set on both takes Cluster API's value and becomes managed": {
			current: map[string]string{"team": "a"}, desired: map[string]string{"team": "b"},
			wantLabels: map[string]string{"team": "b"}, wantManaged: []string{"team"},
		},
		"managed key already gone": {
			current: map[string]string{}, managed: []string{"old"}, desired: map[string]string{"new": "1"},
			wantLabels: map[string]string{"new": "1"}, wantManaged: []string{"new"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			before := map[string]string{}
			for k, v := range tc.current {
				before[k] = v
			}
			labels, managed := SyncLabels(tc.current, tc.managed, tc.desired)
			g.Expect(labels).To(Equal(tc.wantLabels))
			g.Expect(managed).To(ConsistOf(tc.wantManaged))
			if tc.current != nil {
				g.Expect(tc.current).To(Equal(before), "the input is not modified")
			}
		})
	}
}

func TestParseManaged(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ParseManaged("")).To(BeEmpty())
	g.Expect(ParseManaged("a, b/c,,d")).To(Equal([]string{"a", "b/c", "d"}))
}

func TestEnrolledFor(t *testing.T) {
	capiRef := func(name string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: name, UID: "ref-uid", Controller: ptr.To(controller)}
	}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "cm"}
	cases := []struct {
		name      string
		ann       map[string]string
		refs      []metav1.OwnerReference
		wantUID   string
		wantOK    bool
		wantAfter []metav1.OwnerReference
	}{
		{name: "annotations", ann: map[string]string{CAPIClusterNameAnnotation: "a", CAPIClusterUIDAnnotation: "u1"}, wantUID: "u1", wantOK: true},
		{name: "annotations win over a reference", ann: map[string]string{CAPIClusterNameAnnotation: "a", CAPIClusterUIDAnnotation: "u1"},
			refs: []metav1.OwnerReference{capiRef("a", true), other}, wantUID: "u1", wantOK: true, wantAfter: []metav1.OwnerReference{other}},
		{name: "annotated for another name", ann: map[string]string{CAPIClusterNameAnnotation: "b", CAPIClusterUIDAnnotation: "u1"}, wantUID: "u1"},
		{name: "earlier enrollment: controller reference", refs: []metav1.OwnerReference{capiRef("a", true)}, wantUID: "ref-uid", wantOK: true},
		{name: "a reference that is no controller", refs: []metav1.OwnerReference{capiRef("a", false)}},
		{name: "a reference to another name", refs: []metav1.OwnerReference{capiRef("b", true)}},
		{name: "not enrolled", refs: []metav1.OwnerReference{other}, wantAfter: []metav1.OwnerReference{other}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fc := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: tc.ann, OwnerReferences: tc.refs}}
			uid, ok := EnrolledFor(fc)
			g.Expect(ok).To(Equal(tc.wantOK))
			g.Expect(string(uid)).To(Equal(tc.wantUID))
			g.Expect(WithoutCAPIOwner(tc.refs)).To(Equal(tc.wantAfter))
		})
	}
}
