package target

import (
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
)

func TestDeploymentID(t *testing.T) {
	g := NewWithT(t)
	content := names.Content([]byte(`{"resources":[]}`))
	opts := func() fleet.BundleDeploymentOptions {
		return fleet.BundleDeploymentOptions{
			DefaultNamespace: "app",
			NamespaceLabels:  map[string]string{"b": "2", "a": "1", "c": "3"},
			Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{
				"z": 1.0, "a": map[string]interface{}{"y": "x", "b": true}, "m": "n",
			}}},
		}
	}
	id, err := DeploymentID(content, opts())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(MatchRegexp(`^` + content + `:[0-9a-f]{64}$`))

	// Stable: the same options, built again (fresh maps, new iteration
	// order), give the same ID every time.
	for range 20 {
		again, err := DeploymentID(content, opts())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again).To(Equal(id))
	}

	tests := []struct {
		name   string
		change func(*fleet.BundleDeploymentOptions)
		same   bool
	}{
		{"diff does not count", func(o *fleet.BundleDeploymentOptions) {
			o.Diff = &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{{Kind: "Service"}}}
		}, true},
		{"correctDrift does not count", func(o *fleet.BundleDeploymentOptions) {
			o.CorrectDrift = &fleet.CorrectDrift{Enabled: true}
		}, true},
		{"a value counts", func(o *fleet.BundleDeploymentOptions) { o.Helm.Values.Data["z"] = 2.0 }, false},
		{"forceSyncGeneration counts", func(o *fleet.BundleDeploymentOptions) { o.ForceSyncGeneration = 1 }, false},
		{"namespace counts", func(o *fleet.BundleDeploymentOptions) { o.DefaultNamespace = "other" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o := opts()
			tt.change(&o)
			before := *o.DeepCopy()
			got, err := DeploymentID(content, o)
			g.Expect(err).NotTo(HaveOccurred())
			if tt.same {
				g.Expect(got).To(Equal(id))
			} else {
				g.Expect(got).NotTo(Equal(id))
			}
			g.Expect(o).To(Equal(before), "caller's options unchanged")
		})
	}

	other, err := DeploymentID(names.Content([]byte(`{"resources":[{}]}`)), opts())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other).NotTo(Equal(id), "content counts")
}
