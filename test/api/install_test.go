package api_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/internal/install"
	"github.com/gitfleet/fleet/test/framework"
)

// What `fleet install controller` prints is accepted by a real API server,
// as `kubectl apply --dry-run=server -f -` would check it.
func TestInstallControllerDryRun(t *testing.T) {
	g := NewWithT(t)
	out, err := install.ControllerYAML(install.ControllerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := framework.DecodeYAML(out)
	g.Expect(err).NotTo(HaveOccurred())
	// A server-side dry run does not create namespaces, so objects inside a
	// new namespace would be refused (kubectl behaves the same): create the
	// namespaces first, dry-run everything.
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			g.Expect(cl.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
				client.FieldOwner("kubectl"))).To(Succeed())
		}
	}
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
		err := cl.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner("kubectl"), client.ForceOwnership, client.DryRunAll)
		g.Expect(err).NotTo(HaveOccurred(), "%s %s", u.GetKind(), u.GetName())
	}
	g.Expect(kinds).To(HaveKeyWithValue("CustomResourceDefinition", 10))
	g.Expect(kinds).To(HaveKey("Deployment"))
	g.Expect(kinds).To(HaveKey("ClusterRole"))
}
