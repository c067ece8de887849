package helmop

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestCheckReserved(t *testing.T) {
	op := func(name string, labels map[string]string) *fleet.HelmOp {
		return &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fleet.HelmOpSpec{Labels: labels}}
	}
	cases := []struct {
		op   *fleet.HelmOp
		want string
	}{
		{op("app", map[string]string{"team": "a"}), ""},
		{op("fleet-agent-victim", nil), `the name "fleet-agent-victim" begins with "fleet-agent-"`},
		{op("app", map[string]string{"fleet.cattle.io/agent-bundle": "true"}), `spec.labels: label key "fleet.cattle.io/agent-bundle" is reserved`},
	}
	for _, tc := range cases {
		g := NewWithT(t)
		err := checkReserved(tc.op)
		if tc.want == "" {
			g.Expect(err).NotTo(HaveOccurred())
			continue
		}
		g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
	}
}
