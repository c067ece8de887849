package capi

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestDesiredAnnotations(t *testing.T) {
	g := NewWithT(t)
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		"example.com/owner":                                "team-blue",
		"description":                                      "edge store 42",
		"cluster.x-k8s.io/paused":                          "",
		"topology.cluster.x-k8s.io/dry-run":                "",
		HostNetworkAnnotation:                              "true",
		UnenrolledAnnotation:                               "2026-01-01T00:00:00Z",
		"kubectl.kubernetes.io/last-applied-configuration": "{}",
		"notcluster.x-k8s.io/kept":                         "yes",
	}}}
	g.Expect(DesiredAnnotations(c)).To(Equal(map[string]string{"example.com/owner": "team-blue", "description": "edge store 42",
		"notcluster.x-k8s.io/kept": "yes"}), "Cluster API's and fleet's own keys are not copied, as for labels")
	g.Expect(DesiredAnnotations(&clusterv1.Cluster{})).To(BeEmpty())
}

// Copied annotations follow the Cluster API Cluster's, removals included;
// the fleet Cluster's own annotations (fleet's, a person's) stay.
func TestSyncAnnotations(t *testing.T) {
	g := NewWithT(t)
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"a": "1", "b": "2"}}}
	fc := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{CAPIClusterNameAnnotation: "x", "mine": "kept"}}}
	syncAnnotations(fc, c)
	g.Expect(fc.Annotations).To(Equal(map[string]string{CAPIClusterNameAnnotation: "x", "mine": "kept", "a": "1", "b": "2",
		ManagedAnnotationsAnnotation: "a,b"}))
	c.Annotations = map[string]string{"b": "3"}
	syncAnnotations(fc, c)
	g.Expect(fc.Annotations).To(Equal(map[string]string{CAPIClusterNameAnnotation: "x", "mine": "kept", "b": "3",
		ManagedAnnotationsAnnotation: "b"}))
	c.Annotations = nil
	syncAnnotations(fc, c)
	g.Expect(fc.Annotations).To(Equal(map[string]string{CAPIClusterNameAnnotation: "x", "mine": "kept"}))
}

func TestClassGroup(t *testing.T) {
	g := NewWithT(t)
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "alpha"}}
	g.Expect(ClassGroup(c)).To(BeNil(), "no ClusterClass, no group")

	c.Spec.Topology.ClassRef.Name = "quick-start"
	grp := ClassGroup(c)
	g.Expect(grp.Namespace).To(Equal("tenant-a"), "groups select the clusters of their own namespace")
	g.Expect(grp.Name).To(Equal("quick-start"), "a class of the cluster's namespace names its group")
	g.Expect(grp.Labels).To(HaveKeyWithValue(ClassGroupLabel, "true"))
	sel, err := metav1.LabelSelectorAsSelector(grp.Spec.Selector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Matches(labels.Set(DesiredLabels(c)))).To(BeTrue(), "the group selects the fleet Cluster of a cluster of its class")
	other := c.DeepCopy()
	other.Spec.Topology.ClassRef.Name = "other"
	g.Expect(sel.Matches(labels.Set(DesiredLabels(other)))).To(BeFalse(), "and not one of another class")
	elsewhere := c.DeepCopy()
	elsewhere.Spec.Topology.ClassRef.Namespace = "classes"
	g.Expect(sel.Matches(labels.Set(DesiredLabels(elsewhere)))).To(BeFalse(), "nor one of a class of that name in another namespace")

	g.Expect(ClassGroup(elsewhere).Name).To(Equal("quick-start.classes"), "a class of another namespace: <class>.<namespace>, as CAAPF names it")
	long := c.DeepCopy()
	long.Spec.Topology.ClassRef = clusterv1.ClusterClassRef{Name: strings.Repeat("c", 200), Namespace: strings.Repeat("n", 63)}
	g.Expect(len(ClassGroup(long).Name)).To(BeNumerically("<=", 253))
}
