package ocistorage_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitfleet/fleet/internal/ocistorage"
)

func TestReadLimit(t *testing.T) {
	const etcd = 1536 << 10
	manager := types.NamespacedName{Namespace: "fleet-system", Name: "registry"}
	for _, tc := range []struct {
		name    string
		d       ocistorage.Default
		own     bool
		want    int
		wantOCI bool
	}{
		{name: "no registry", d: ocistorage.Default{}, want: etcd},
		{name: "the GitRepo's own registry", d: ocistorage.Default{}, own: true, want: ocistorage.DefaultMaxBytes, wantOCI: true},
		{name: "its own, with a bound", d: ocistorage.Default{MaxBytes: 8 << 20}, own: true, want: 8 << 20, wantOCI: true},
		{name: "a bound under etcd's is etcd's", d: ocistorage.Default{MaxBytes: 1 << 20}, own: true, want: etcd, wantOCI: true},
		{name: "the manager's, default threshold", d: ocistorage.Default{Secret: manager}, want: ocistorage.DefaultMaxBytes, wantOCI: true},
		{name: "the manager's, threshold at etcd's limit", d: ocistorage.Default{Secret: manager, Threshold: etcd}, want: etcd},
		{name: "the manager's, threshold above etcd's limit", d: ocistorage.Default{Secret: manager, Threshold: 4 << 20}, want: etcd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, oci := tc.d.ReadLimit(tc.own, etcd)
			g.Expect(got).To(Equal(tc.want))
			g.Expect(oci).To(Equal(tc.wantOCI))
		})
	}
}
