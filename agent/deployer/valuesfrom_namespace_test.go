package deployer

import (
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// A valuesFrom source that downstreamResources copies is read from the
// release namespace whatever namespace it names, as Fleet's agent does
// (rancher/fleet#4274): the Rancher UI writes the source's upstream
// namespace into configMapKeyRef and secretKeyRef.
func TestValuesFromNamespace(t *testing.T) {
	copied := []fleet.DownstreamResource{{Kind: "Secret", Name: "db"}, {Kind: "ConfigMap", Name: "settings"}}
	for _, tc := range []struct {
		name, kind, ref, namespace, want string
	}{
		{"no namespace: the release's", "ConfigMap", "other", "", "app"},
		{"a namespace of its own", "ConfigMap", "other", "config", "config"},
		{"a copied ConfigMap naming its upstream namespace", "ConfigMap", "settings", "fleet-default", "app"},
		{"a copied Secret naming its upstream namespace", "Secret", "db", "fleet-default", "app"},
		{"same name, other kind: not the copy", "Secret", "settings", "fleet-default", "fleet-default"},
		{"kinds are matched as Fleet writes them", "secret", "db", "fleet-default", "fleet-default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(ValuesFromNamespace(tc.kind, tc.ref, tc.namespace, "app", copied)).To(Equal(tc.want))
		})
	}
}
