package deployer

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// TestNamespaceSelected: the agent's check of allowedTargetNamespaceSelector
// against the downstream namespace, its messages beginning with Fleet's
// texts, against the package's real API server. (The envtest in
// agent/bundledeployment runs it through a deploy.)
func TestNamespaceSelected(t *testing.T) {
	c, err := controlPlane(t).Client(kinds.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nssel-plain"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nssel-team-a", Labels: map[string]string{"team": "a", "env": "prod"}}},
	} {
		if err := c.Create(t.Context(), ns); err != nil {
			t.Fatal(err)
		}
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	for name, tc := range map[string]struct {
		ns     string
		sel    *metav1.LabelSelector
		reason string
		prefix string
	}{
		"no selector allows any": {ns: "nssel-missing"},
		"labelled":               {ns: "nssel-team-a", sel: sel},
		"missing":                {ns: "nssel-missing", sel: sel, reason: fleet.ReasonNamespaceNotAllowed, prefix: "target namespace nssel-missing does not exist on downstream cluster"},
		"without the labels":     {ns: "nssel-plain", sel: sel, reason: fleet.ReasonNamespaceNotAllowed, prefix: "target namespace nssel-plain does not match AllowedTargetNamespaceSelector team=a"},
		"an invalid selector stalls": {ns: "nssel-team-a", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}},
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
