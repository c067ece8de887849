package deployer

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// A valuesFrom entry naming both a ConfigMap and a Secret reads both, the
// Secret merged over the ConfigMap, as Fleet's helmdeployer does ("merge
// secret last"); an entry naming neither is refused. Against a real API
// server.
func TestValuesFromEntryWithConfigMapAndSecretReadsBoth(t *testing.T) {
	g := NewWithT(t)
	local, err := controlPlane(t).Client(clientgoscheme.Scheme)
	g.Expect(err).NotTo(HaveOccurred())
	const ns = "values-both"
	g.Expect(local.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(local.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
		Data: map[string]string{"values.yaml": "fromConfigMap: true\nshared: {by: configmap, cm: 1}\n"}})).To(Succeed())
	g.Expect(local.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hidden"},
		Data: map[string][]byte{"creds.yaml": []byte("fromSecret: true\nshared: {by: secret}\n")}})).To(Succeed())

	opts := fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
		Values: &fleet.GenericMap{Data: map[string]interface{}{"fromValues": true}},
		ValuesFrom: []fleet.ValuesFrom{{
			ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "plain"},
			SecretKeyRef:    &fleet.SecretKeySelector{Name: "hidden", Key: "creds.yaml"},
		}},
	}}
	v, err := Values(t.Context(), local, opts, ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(map[string]interface{}{
		"fromValues":    true,
		"fromConfigMap": true,
		"fromSecret":    true,
		"shared":        map[string]interface{}{"by": "secret", "cm": float64(1)},
	}), "both sources read, the Secret winning")

	// A missing Secret in such an entry is reported, not skipped.
	opts.Helm.ValuesFrom[0].SecretKeyRef.Name = "nope"
	_, err = Values(t.Context(), local, opts, ns)
	g.Expect(outcome.IsStalling(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("secret values-both/nope not found")))

	_, err = Values(t.Context(), local, fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{ValuesFrom: []fleet.ValuesFrom{{}}}}, ns)
	g.Expect(outcome.IsStalling(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError("helm.valuesFrom[0]: set configMapKeyRef or secretKeyRef"))
}
