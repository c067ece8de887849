package bundle

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestCheckHelmOpsBundle(t *testing.T) {
	spec := func(repo, chart, version, targetVersion string) *fleet.BundleSpec {
		s := &fleet.BundleSpec{HelmOpOptions: &fleet.BundleHelmOptions{}}
		s.Helm = &fleet.HelmOptions{Repo: repo, Chart: chart, Version: version}
		if targetVersion != "" {
			s.Targets = []fleet.BundleTarget{{BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Version: targetVersion}}}}
		}
		return s
	}
	withResources := spec("https://r", "app", "1.0.0", "")
	withResources.Resources = []fleet.BundleResource{{Name: "x"}}
	for _, tc := range []struct {
		name string
		spec *fleet.BundleSpec
		want string
	}{
		{"exact", spec("https://r", "app", "1.0.0", ""), ""},
		{"v prefix, as Fleet allows", spec("https://r", "app", "v1.0.0", ""), ""},
		{"oci", spec("oci://r/app", "", "1.0.0", ""), ""},
		{"chart url", spec("", "https://r/app-1.0.0.tgz", "", ""), ""},
		{"constraint", spec("https://r", "app", "^1", ""), `helm.version "^1" is not an exact version`},
		{"target constraint", spec("https://r", "app", "1.0.0", "2.x"), `targets[0].helm.version "2.x"`},
		{"local chart", spec("", "./app", "", ""), "does not name the chart"},
		{"resources", withResources, "holds no content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := checkHelmOpsBundle(tc.spec)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

func TestHelmOpsSecret(t *testing.T) {
	g := NewWithT(t)
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "cluster-ns", UID: "u1"}}
	s := helmOpsSecret(bd, map[string][]byte{"username": []byte("u"), "password": []byte("p"), "ssh-privatekey": []byte("no")})
	g.Expect(s.Name).To(Equal("app"))
	g.Expect(s.Namespace).To(Equal("cluster-ns"))
	g.Expect(s.Type).To(Equal(corev1.SecretType(fleet.HelmOpsAccessSecretType)))
	g.Expect(s.Data).To(Equal(map[string][]byte{"username": []byte("u"), "password": []byte("p")}), "only what the agent uses")
	g.Expect(s.OwnerReferences).To(ConsistOf(And(HaveField("UID", bd.UID), HaveField("Kind", "BundleDeployment"), HaveField("Controller", HaveValue(BeTrue())))))
}
