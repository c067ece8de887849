package deployer

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Render builds the release's objects as Deploy would, with no cluster:
// values, release labels, the release namespace, hooks, kept CRDs.
func TestRender(t *testing.T) {
	g := NewWithT(t)
	files := Files{
		"Chart.yaml":  []byte("apiVersion: v2\nname: app\nversion: 1.0.0\n"),
		"values.yaml": []byte("replicas: 1\nname: default\n"),
		"templates/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cfg\ndata:\n" +
			"  name: {{ .Values.name | quote }}\n  replicas: {{ .Values.replicas | quote }}\n"),
		"templates/role.yaml": []byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: app-reader\nrules: []\n"),
		"templates/hook.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hooked\n  annotations:\n    helm.sh/hook: pre-install\n"),
		"crds/crd.yaml": []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n" +
			"spec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions: []\n"),
	}
	opts := fleet.BundleDeploymentOptions{DefaultNamespace: "apps", Helm: &fleet.HelmOptions{
		Values: &fleet.GenericMap{Data: map[string]interface{}{"name": "cluster-one"}},
	}}
	objs, err := Render(t.Context(), Input{Name: "my-bundle", Options: opts, Files: files}, OfflineScope)
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byName[o.GetName()] = o
	}
	g.Expect(byName).To(HaveKey("widgets.example.com"), "CRDs are included")
	g.Expect(byName).To(HaveKey("hooked"), "hooks are included")
	cm := byName["my-bundle-cfg"]
	g.Expect(cm).NotTo(BeNil(), "the release is named after the BundleDeployment")
	g.Expect(cm.Object["data"]).To(Equal(map[string]interface{}{"name": "cluster-one", "replicas": "1"}), "helm.values over the chart's values")
	g.Expect(cm.GetNamespace()).To(Equal("apps"), "a namespaced object without a namespace lands in the release namespace")
	g.Expect(cm.GetLabels()).To(HaveKeyWithValue(fleet.ReleaseNameLabel, "my-bundle"))
	g.Expect(byName["app-reader"].GetNamespace()).To(BeEmpty(), "a ClusterRole stays cluster-scoped")

	t.Log("a forced namespace refuses a cluster-scoped object, as Deploy does")
	opts.TargetNamespace = "forced"
	_, err = Render(t.Context(), Input{Name: "my-bundle", Options: opts, Files: files}, OfflineScope)
	g.Expect(err).To(MatchError(ContainSubstring("cluster-scoped")))

	t.Log("plain manifests with an overlay")
	objs, err = Render(t.Context(), Input{Name: "plain", Options: fleet.BundleDeploymentOptions{YAML: &fleet.YAMLOptions{Overlays: []string{"prod"}}}, Files: Files{
		"cm.yaml":               []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  env: base\n"),
		"overlays/prod/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  env: prod\n"),
	}}, OfflineScope)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))
	g.Expect(objs[0].Object["data"]).To(Equal(map[string]interface{}{"env": "prod"}))
	g.Expect(objs[0].GetNamespace()).To(Equal("default"))
}
