package deployer

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// TestNamespaceSelected: the agent's check of allowedTargetNamespaceSelector
// against the downstream namespace, its messages beginning with Fleet's
// texts. (The envtest in agent/bundledeployment runs it through a deploy.)
func TestNamespaceSelected(t *testing.T) {
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(corev1.AddToScheme(scheme)).To(Succeed())
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a", "env": "prod"}}},
	).Build()
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	for name, tc := range map[string]struct {
		ns     string
		sel    *metav1.LabelSelector
		reason string
		prefix string
	}{
		"no selector allows any": {ns: "missing"},
		"labelled":               {ns: "team-a", sel: sel},
		"missing":                {ns: "missing", sel: sel, reason: fleet.ReasonNamespaceNotAllowed, prefix: "target namespace missing does not exist on downstream cluster"},
		"without the labels":     {ns: "plain", sel: sel, reason: fleet.ReasonNamespaceNotAllowed, prefix: "target namespace plain does not match AllowedTargetNamespaceSelector team=a"},
		"an invalid selector stalls": {ns: "team-a", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}},
			reason: fleet.ReasonInvalidBundle, prefix: "allowedTargetNamespaceSelector is not a valid label selector"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := namespaceSelected(t.Context(), c, tc.ns, tc.sel, time.Second)
			if tc.reason == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(HavePrefix(tc.prefix))
			g.Expect(outcome.ReasonOf(err, "")).To(Equal(tc.reason))
			g.Expect(outcome.IsWaiting(err)).To(Equal(tc.reason == fleet.ReasonNamespaceNotAllowed), "a namespace can be labelled: looked at again")
		})
	}
}
