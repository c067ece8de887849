package v1alpha1

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestAddToScheme checks that AddToScheme registers every kind of the
// package, with its list, under GroupVersion, and the meta types a client
// needs to list and watch them.
func TestAddToScheme(t *testing.T) {
	g := NewWithT(t)
	s := runtime.NewScheme()
	g.Expect(AddToScheme(s)).To(Succeed())

	kinds := []string{"Bundle", "BundleDeployment", "BundleNamespaceMapping", "Cluster", "ClusterGroup",
		"ClusterRegistration", "ClusterRegistrationToken", "Content", "GitRepo", "GitRepoRestriction", "HelmOp"}
	known := s.KnownTypes(GroupVersion)
	for _, k := range kinds {
		g.Expect(known).To(HaveKey(k), "kind %s", k)
		g.Expect(known).To(HaveKey(k+"List"), "kind %sList", k)
	}
	gvks, _, err := s.ObjectKinds(&GitRepo{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gvks).To(ConsistOf(GroupVersion.WithKind("GitRepo")))
	g.Expect(known).To(HaveKey("ListOptions"), "metav1.AddToGroupVersion")
	g.Expect(s.Recognizes(GroupVersion.WithKind("WatchEvent"))).To(BeTrue())
}
