package agentinstall

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Every kind Objects renders maps without asking a cluster.
func TestRESTMapperCoversObjects(t *testing.T) {
	g := NewWithT(t)
	s := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	objs, err := Objects(Options{Config: &AgentConfig{}, Bootstrap: &Bootstrap{APIServerURL: "https://m", Token: "t",
		ClusterNamespace: "fleet-default", SystemRegistrationNamespace: "fleet-clusters-system"},
		Scheduling: &fleet.AgentSchedulingCustomization{PriorityClass: &fleet.PriorityClassSpec{}, PodDisruptionBudget: &fleet.PodDisruptionBudgetSpec{}}})
	g.Expect(err).NotTo(HaveOccurred())
	m := RESTMapper()
	for _, o := range objs {
		gvk, err := apiutil.GVKForObject(o, s)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = m.RESTMapping(gvk.GroupKind(), gvk.Version)
		g.Expect(err).NotTo(HaveOccurred(), "%s", gvk)
	}
}
