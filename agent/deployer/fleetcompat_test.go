package deployer

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// What a Fleet user relies on when a release is installed and upgraded,
// against a real API server.

// helm.values first, then each valuesFrom over them in order (Fleet's
// helmdeployer and its documentation: values, valuesFiles, valuesFrom).
func TestValuesFromOverValues(t *testing.T) {
	g := NewWithT(t)
	local, err := controlPlane(t).Client(kinds.Scheme())
	g.Expect(err).NotTo(HaveOccurred())
	const ns = "values-order"
	g.Expect(local.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(local.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"},
		Data: map[string]string{"values.yaml": "replicas: 3\nimage: {tag: from-first}\n"}})).To(Succeed())
	g.Expect(local.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"},
		Data: map[string][]byte{"values.yaml": []byte("image: {tag: from-second}\n")}})).To(Succeed())
	opts := fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
		Values: &fleet.GenericMap{Data: map[string]interface{}{
			"replicas": 1, "image": map[string]interface{}{"repo": "app", "tag": "from-values"}, "kept": true}},
		ValuesFrom: []fleet.ValuesFrom{
			{ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "first"}},
			{SecretKeyRef: &fleet.SecretKeySelector{Name: "second"}},
		},
	}}
	v, err := Values(t.Context(), local, opts, ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(HaveKeyWithValue("replicas", BeNumerically("==", 3)), "a valuesFrom source wins over helm.values")
	g.Expect(v).To(HaveKeyWithValue("kept", true))
	g.Expect(v).To(HaveKeyWithValue("image", Equal(map[string]interface{}{"repo": "app", "tag": "from-second"})),
		"nested values merge, the later source winning")
	g.Expect(opts.Helm.Values.Data).To(HaveKeyWithValue("replicas", 1), "the options are left as they were")
}

// Adding a manifest for an object made by hand to a deployed bundle adopts
// that object on the upgrade, as Fleet's upgrades do; the install, without
// helm.takeOwnership, still refuses to.
func TestUpgradeAdoptsAnExistingObject(t *testing.T) {
	g := NewWithT(t)
	c, err := controlPlane(t).Client(kinds.Scheme())
	g.Expect(err).NotTo(HaveOccurred())
	d, err := New(controlPlane(t).Config, c, "cluster-ns")
	g.Expect(err).NotTo(HaveOccurred())
	const ns = "adopt"
	g.Expect(c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	byHand := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "made-by-hand"}, Data: map[string]string{"k": "hand"}}
	g.Expect(c.Create(t.Context(), byHand)).To(Succeed())
	cm := func(name, v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {k: \"" + v + "\"}\n"
	}
	opts := fleet.BundleDeploymentOptions{DefaultNamespace: ns}

	_, err = d.Deploy(t.Context(), Input{Name: "adopt-install", DeploymentID: "1", Options: opts,
		Files: Files{"a.yaml": []byte(cm("a", "1")), "b.yaml": []byte(cm("made-by-hand", "fleet"))}})
	g.Expect(err).To(HaveOccurred(), "an install does not adopt without helm.takeOwnership")

	_, err = d.Deploy(t.Context(), Input{Name: "adopt", DeploymentID: "1", Options: opts, Files: Files{"a.yaml": []byte(cm("a", "1"))}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = d.Deploy(t.Context(), Input{Name: "adopt", DeploymentID: "2", Options: opts,
		Files: Files{"a.yaml": []byte(cm("a", "2")), "b.yaml": []byte(cm("made-by-hand", "fleet"))}})
	g.Expect(err).NotTo(HaveOccurred(), "the upgrade adopts the object made by hand")
	got := &corev1.ConfigMap{}
	g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(byHand), got)).To(Succeed())
	g.Expect(got.Data).To(HaveKeyWithValue("k", "fleet"))
	g.Expect(got.Annotations).To(HaveKey("meta.helm.sh/release-name"))
}

// helm.timeoutSeconds makes the release wait for its objects to become ready,
// as in Fleet: here no Deployment ever becomes ready (no controllers run), so
// the install fails once the timeout has passed instead of reporting it
// deployed.
func TestTimeoutWaitsForReadiness(t *testing.T) {
	g := NewWithT(t)
	c, err := controlPlane(t).Client(kinds.Scheme())
	g.Expect(err).NotTo(HaveOccurred())
	d, err := New(controlPlane(t).Config, c, "cluster-ns")
	g.Expect(err).NotTo(HaveOccurred())
	const ns = "timeout-waits"
	g.Expect(c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	deploy := strings.Join([]string{
		"apiVersion: apps/v1", "kind: Deployment", "metadata: {name: never-ready}",
		"spec:", "  replicas: 1", "  selector: {matchLabels: {app: never-ready}}",
		"  template:", "    metadata: {labels: {app: never-ready}}",
		"    spec: {containers: [{name: app, image: app:1}]}", ""}, "\n")
	start := time.Now()
	_, err = d.Deploy(t.Context(), Input{Name: "never-ready", DeploymentID: "1", Files: Files{"d.yaml": []byte(deploy)},
		Options: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Helm: &fleet.HelmOptions{TimeoutSeconds: 2}}})
	g.Expect(err).To(HaveOccurred(), "the release waited for a Deployment that never becomes ready")
	g.Expect(time.Since(start)).To(BeNumerically(">=", 2*time.Second))
}
