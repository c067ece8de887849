package api_test

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

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
	var crds []string
	for _, u := range objs {
		kinds[u.GetKind()]++
		if u.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, u.GetName())
		}
		err := cl.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner("kubectl"), client.ForceOwnership, client.DryRunAll)
		g.Expect(err).NotTo(HaveOccurred(), "%s %s", u.GetKind(), u.GetName())
	}
	bases, err := filepath.Glob("../../config/crd/bases/*.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kinds).To(HaveKeyWithValue("CustomResourceDefinition", len(bases)), "one per file in config/crd/bases")
	g.Expect(crds).To(ContainElement("helmops.fleet.cattle.io"))
	g.Expect(kinds).To(HaveKey("Deployment"))
	g.Expect(kinds).To(HaveKey("ClusterRole"))
}

// config/default, built with kustomize, holds exactly the objects that
// `fleet install controller` prints: the two ways to install cannot drift.
func TestConfigMatchesInstallController(t *testing.T) {
	g := NewWithT(t)
	out, err := install.ControllerYAML(install.ControllerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	printed, err := framework.DecodeYAML(out)
	g.Expect(err).NotTo(HaveOccurred())

	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), "../../config/default")
	g.Expect(err).NotTo(HaveOccurred())
	built, err := res.AsYaml()
	g.Expect(err).NotTo(HaveOccurred())
	fromConfig, err := framework.DecodeYAML(built)
	g.Expect(err).NotTo(HaveOccurred())

	key := func(u *unstructured.Unstructured) string {
		return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
	}
	want := map[string]*unstructured.Unstructured{}
	for _, u := range printed {
		want[key(u)] = u
	}
	g.Expect(fromConfig).To(HaveLen(len(printed)), "config/default and fleet install controller hold different objects")
	for _, u := range fromConfig {
		w, ok := want[key(u)]
		g.Expect(ok).To(BeTrue(), "%s is in config/ but not printed by fleet install controller", key(u))
		g.Expect(u.Object).To(Equal(w.Object), "%s differs between config/ and fleet install controller: update config/", key(u))
	}
}
