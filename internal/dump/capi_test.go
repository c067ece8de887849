package dump

import (
	"bytes"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/capienroll"
	"github.com/gitfleet/fleet/internal/diagnose"
)

// TestCAPIClustersKeepOnlyWhatTellsEnrolment: a dump holds Cluster API's
// Clusters' metadata, spec.paused and status phase, conditions and
// initialization, nothing else, and analyze finds from it what it finds
// live.
func TestCAPIClustersKeepOnlyWhatTellsEnrolment(t *testing.T) {
	g := NewWithT(t)
	taken := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	hourAgo := metav1.NewTime(taken.Add(-time.Hour))
	c := clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "c1", CreationTimestamp: hourAgo,
		Labels:        map[string]string{"env": "prod"},
		Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{big}"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "capi"}}},
		Spec: clusterv1.ClusterSpec{Paused: ptr.To(false), ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443},
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "c1"}},
		Status: clusterv1.ClusterStatus{Phase: "Provisioned", Initialization: clusterv1.ClusterInitializationStatus{ControlPlaneInitialized: ptr.To(true)},
			Conditions: []metav1.Condition{{Type: capienroll.ConditionFleetAgentReady, Status: metav1.ConditionFalse, Reason: fleet.ReasonWaitingForControlPlane,
				Message: "waiting for the kubeconfig Secret c1-kubeconfig", LastTransitionTime: hourAgo}},
			FailureDomains: []clusterv1.FailureDomain{{Name: "zone-a"}}}}
	s := diagnose.Snapshot{Taken: taken, CAPIClusters: []clusterv1.Cluster{c}}
	Scrub(&s)
	kept := s.CAPIClusters[0]
	g.Expect(kept.ManagedFields).To(BeNil())
	g.Expect(kept.Annotations).NotTo(HaveKey("kubectl.kubernetes.io/last-applied-configuration"))
	g.Expect(kept.Labels).To(Equal(c.Labels))
	g.Expect(kept.Spec).To(Equal(clusterv1.ClusterSpec{Paused: ptr.To(false)}))
	g.Expect(kept.Status.FailureDomains).To(BeEmpty())
	g.Expect(kept.Status.Phase).To(Equal("Provisioned"))
	live, _ := diagnose.Analyze(&s, diagnose.Options{})
	g.Expect(live).To(ConsistOf(HaveField("Check", diagnose.CheckCAPINotEnrolled)))

	var buf bytes.Buffer
	g.Expect((&Archive{Snapshot: s}).Write(&buf, "test")).To(Succeed())
	g.Expect(buf.Len()).To(BeNumerically(">", 0))
	back, err := Read(bytes.NewReader(buf.Bytes()), "x.tgz")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Snapshot.CAPIClusters).To(HaveLen(1))
	g.Expect(back.Snapshot.CAPIClusters[0].Kind).To(Equal("Cluster"))
	g.Expect(back.Snapshot.CAPIClusters[0].APIVersion).To(Equal(clusterv1.GroupVersion.String()))
	offline, skipped := diagnose.Analyze(&back.Snapshot, diagnose.Options{})
	g.Expect(skipped).To(BeEmpty())
	g.Expect(offline).To(Equal(live))
}

// TestArchiveWithoutCAPIClusters: an archive of an older fleet, without
// the file, reads; the check is not run, and says why.
func TestArchiveWithoutCAPIClusters(t *testing.T) {
	g := NewWithT(t)
	files := map[string]string{"fleet-dump/manifest.json": `{"format":"` + Format + `"}`}
	for _, f := range files0() {
		if f != diagnose.KindCAPICluster {
			files["fleet-dump/"+f+".yaml"] = "apiVersion: v1\nkind: List\nitems: []\n"
		}
	}
	a, err := Read(bytes.NewReader(tarGz(t, files)), "old.tgz")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Snapshot.Absent).To(Equal([]string{diagnose.KindCAPICluster}))
	_, skipped := diagnose.Analyze(&a.Snapshot, diagnose.Options{})
	g.Expect(skipped).To(ConsistOf(ContainSubstring(diagnose.CheckCAPINotEnrolled)))
}

func files0() []string {
	fs := files(&diagnose.Snapshot{})
	kinds := make([]string, 0, len(fs))
	for _, f := range fs {
		kinds = append(kinds, f.kind)
	}
	return kinds
}

func TestFilterKeepsTheCAPIClustersOfItsClusters(t *testing.T) {
	g := NewWithT(t)
	mk := func(ns, name string) clusterv1.Cluster {
		return clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	s := diagnose.Snapshot{CAPIClusters: []clusterv1.Cluster{mk("ws", "a"), mk("ws", "b"), mk("other", "a")}}
	apply(&s, Filter{Namespace: "ws", Cluster: "a"})
	g.Expect(s.CAPIClusters).To(ConsistOf(HaveField("ObjectMeta.Name", "a")))
	g.Expect(s.CAPIClusters[0].Namespace).To(Equal("ws"))
}
