package capi_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
)

// With ClassGroups, enrolled clusters of a ClusterClass get a ClusterGroup of
// their class that selects them (and not the clusters of another class), and
// their fleet Clusters carry the Cluster API Cluster's annotations, kept in
// sync, fleet's and Cluster API's keys left out. A group of that name that a
// person made is left alone.
func TestClusterGroupPerClusterClassAndAnnotations(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "capi-groups")
	g.Expect(err).NotTo(HaveOccurred())
	withClass := func(class string) func(*clusterv1.Cluster) {
		return func(c *clusterv1.Cluster) {
			c.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: class}, Version: "v1.36.0"}
			c.Annotations = map[string]string{"example.com/owner": "team-blue", "cluster.x-k8s.io/paused-not": "x", capi.UnenrolledAnnotation + "-not": "y"}
		}
	}
	// A person's group of the name the second class would get.
	mine := &fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "edge"},
		Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"mine": "yes"}}}}
	g.Expect(env.CreateAndWait(ctx, mine)).To(Succeed())
	for name, class := range map[string]string{"one": "quick-start", "two": "quick-start", "three": "edge"} {
		capiCluster(t, ns.Name, name, true, withClass(class))
		kubeconfigSecret(t, ns.Name, name)
	}
	group := func(name string) func() (*fleet.ClusterGroup, error) {
		return func() (*fleet.ClusterGroup, error) {
			grp := &fleet.ClusterGroup{}
			return grp, env.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: name}, grp)
		}
	}
	g.Eventually(group("quick-start")).WithTimeout(20*time.Second).Should(And(
		HaveField("Labels", HaveKeyWithValue(capi.ClassGroupLabel, "true")),
		HaveField("Spec.Selector.MatchLabels", Equal(map[string]string{capi.ClusterClassLabel: "quick-start", capi.ClusterClassNamespaceLabel: ns.Name})),
	), "the ClusterGroup of ClusterClass quick-start")
	// The cluster group controller is not running here: the group's
	// selection is checked against the fleet Clusters' labels.
	for _, name := range []string{"one", "two", "three"} {
		g.Eventually(fleetCluster(ctx, ns.Name, name)).WithTimeout(20*time.Second).Should(Not(BeNil()), "fleet Cluster %s", name)
	}
	grp, err := group("quick-start")()
	g.Expect(err).NotTo(HaveOccurred())
	sel, err := metav1.LabelSelectorAsSelector(grp.Spec.Selector)
	g.Expect(err).NotTo(HaveOccurred())
	list := &fleet.ClusterList{}
	g.Expect(env.List(ctx, list, client.InNamespace(ns.Name), client.MatchingLabelsSelector{Selector: sel})).To(Succeed())
	selected := make([]string, 0, len(list.Items))
	for _, c := range list.Items {
		selected = append(selected, c.Name)
	}
	g.Expect(selected).To(ConsistOf("one", "two"), "the group holds the clusters of its class")

	g.Consistently(group("edge")).WithTimeout(2*time.Second).Should(And(
		HaveField("Labels", Not(HaveKey(capi.ClassGroupLabel))),
		HaveField("Spec.Selector.MatchLabels", Equal(map[string]string{"mine": "yes"})),
	), "a person's group of the same name is left alone")

	// Annotations are copied as labels are, and follow the Cluster API
	// Cluster's.
	g.Eventually(fleetCluster(ctx, ns.Name, "one")).WithTimeout(20 * time.Second).Should(HaveField("Annotations", And(
		HaveKeyWithValue("example.com/owner", "team-blue"),
		HaveKeyWithValue(capi.ManagedAnnotationsAnnotation, "example.com/owner"),
		Not(HaveKey("cluster.x-k8s.io/paused-not")), Not(HaveKey(capi.UnenrolledAnnotation+"-not")),
		HaveKeyWithValue(capi.CAPIClusterNameAnnotation, "one"),
	)))
	c := &clusterv1.Cluster{}
	g.Expect(env.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: "one"}, c)).To(Succeed())
	patch := client.MergeFrom(c.DeepCopy())
	delete(c.Annotations, "example.com/owner")
	c.Annotations["example.com/site"] = "store-42"
	g.Expect(env.Patch(ctx, c, patch)).To(Succeed())
	g.Eventually(fleetCluster(ctx, ns.Name, "one")).WithTimeout(20*time.Second).Should(HaveField("Annotations", And(
		HaveKeyWithValue("example.com/site", "store-42"), Not(HaveKey("example.com/owner")),
		HaveKeyWithValue(capi.CAPIClusterNameAnnotation, "one"),
	)), "a removed annotation is removed, a new one copied, fleet's own kept")
}
