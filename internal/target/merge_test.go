package target

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestMerge(t *testing.T) {
	tests := []struct {
		name           string
		base, override fleet.BundleDeploymentOptions
		want           fleet.BundleDeploymentOptions
	}{
		{
			name: "empty override keeps base",
			base: fleet.BundleDeploymentOptions{DefaultNamespace: "a", KeepResources: true, Helm: &fleet.HelmOptions{Chart: "c"}},
			want: fleet.BundleDeploymentOptions{DefaultNamespace: "a", KeepResources: true, Helm: &fleet.HelmOptions{Chart: "c"}},
		},
		{
			name:     "scalars replace when set",
			base:     fleet.BundleDeploymentOptions{DefaultNamespace: "a", TargetNamespace: "t", ServiceAccount: "sa", ForceSyncGeneration: 1},
			override: fleet.BundleDeploymentOptions{DefaultNamespace: "b", ForceSyncGeneration: 2, CreateNamespace: ptr.To(true)},
			want:     fleet.BundleDeploymentOptions{DefaultNamespace: "b", TargetNamespace: "t", ServiceAccount: "sa", ForceSyncGeneration: 2, CreateNamespace: ptr.To(true)},
		},
		{
			name:     "false does not turn a bool off",
			base:     fleet.BundleDeploymentOptions{KeepResources: true, DeleteNamespace: true},
			override: fleet.BundleDeploymentOptions{DefaultNamespace: "x"},
			want:     fleet.BundleDeploymentOptions{KeepResources: true, DeleteNamespace: true, DefaultNamespace: "x"},
		},
		{
			name:     "namespace labels and annotations merge",
			base:     fleet.BundleDeploymentOptions{NamespaceLabels: map[string]string{"a": "1", "b": "1"}},
			override: fleet.BundleDeploymentOptions{NamespaceLabels: map[string]string{"b": "2"}, NamespaceAnnotations: map[string]string{"n": "x"}},
			want: fleet.BundleDeploymentOptions{
				NamespaceLabels:      map[string]string{"a": "1", "b": "2"},
				NamespaceAnnotations: map[string]string{"n": "x"},
			},
		},
		{
			name: "pointer structs merge field by field; correctDrift is replaced whole",
			base: fleet.BundleDeploymentOptions{
				CorrectDrift: &fleet.CorrectDrift{Enabled: true},
				Kustomize:    &fleet.KustomizeOptions{Dir: "base"},
			},
			override: fleet.BundleDeploymentOptions{
				CorrectDrift: &fleet.CorrectDrift{Force: true},
				Kustomize:    &fleet.KustomizeOptions{},
				YAML:         &fleet.YAMLOptions{Overlays: []string{"prod"}},
			},
			want: fleet.BundleDeploymentOptions{
				CorrectDrift: &fleet.CorrectDrift{Force: true},
				Kustomize:    &fleet.KustomizeOptions{Dir: "base"},
				YAML:         &fleet.YAMLOptions{Overlays: []string{"prod"}},
			},
		},
		{
			name:     "a customization turns drift correction off",
			base:     fleet.BundleDeploymentOptions{CorrectDrift: &fleet.CorrectDrift{Enabled: true, Force: true}},
			override: fleet.BundleDeploymentOptions{CorrectDrift: &fleet.CorrectDrift{}},
			want:     fleet.BundleDeploymentOptions{CorrectDrift: &fleet.CorrectDrift{}},
		},
		{
			name: "overlays append; compare patches and values sources merge by what they name",
			base: fleet.BundleDeploymentOptions{
				YAML: &fleet.YAMLOptions{Overlays: []string{"common"}},
				Diff: &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{
					{APIVersion: "apps/v1", Kind: "Deployment", Name: "a", JSONPointers: []string{"/spec/replicas"}},
					{APIVersion: "v1", Kind: "Service", Name: "s", JSONPointers: []string{"/spec/ports"}},
				}},
				Helm: &fleet.HelmOptions{ValuesFrom: []fleet.ValuesFrom{
					{ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "base", Key: "values.yaml"}},
					{SecretKeyRef: &fleet.SecretKeySelector{Name: "creds"}},
				}},
			},
			override: fleet.BundleDeploymentOptions{
				YAML: &fleet.YAMLOptions{Overlays: []string{"prod"}},
				Diff: &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{
					{APIVersion: "apps/v1", Kind: "Deployment", Name: "a", JSONPointers: []string{"/spec/template"}},
					{APIVersion: "apps/v1", Kind: "Deployment", Name: "a", JSONPointers: []string{"/ignored, the first of a key counts"}},
					{APIVersion: "v1", Kind: "ConfigMap", Name: "c", JSONPointers: []string{"/data"}},
				}},
				Helm: &fleet.HelmOptions{ValuesFrom: []fleet.ValuesFrom{
					{ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "prod", Key: "values.yaml"}},
					{},
				}},
			},
			want: fleet.BundleDeploymentOptions{
				YAML: &fleet.YAMLOptions{Overlays: []string{"common", "prod"}},
				Diff: &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{
					{APIVersion: "apps/v1", Kind: "Deployment", Name: "a", JSONPointers: []string{"/spec/template"}},
					{APIVersion: "v1", Kind: "Service", Name: "s", JSONPointers: []string{"/spec/ports"}},
					{APIVersion: "v1", Kind: "ConfigMap", Name: "c", JSONPointers: []string{"/data"}},
				}},
				Helm: &fleet.HelmOptions{ValuesFrom: []fleet.ValuesFrom{
					{ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "base", Key: "values.yaml"}},
					{SecretKeyRef: &fleet.SecretKeySelector{Name: "creds"}},
					{ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "prod", Key: "values.yaml"}},
					{},
				}},
			},
		},
		{
			name:     "a negative timeout resets it",
			base:     fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{TimeoutSeconds: 60}},
			override: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{TimeoutSeconds: -1}},
			want:     fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{}},
		},
		{
			name: "conditions and values files: non-empty lists replace",
			base: fleet.BundleDeploymentOptions{
				Diff:   &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{{Kind: "A"}}},
				YAML:   &fleet.YAMLOptions{Overlays: []string{"a", "b"}},
				Ignore: fleet.IgnoreOptions{Conditions: []map[string]string{{"type": "A"}}},
				Helm:   &fleet.HelmOptions{ValuesFiles: []string{"v1.yaml"}},
			},
			override: fleet.BundleDeploymentOptions{
				Diff:   &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{{Kind: "B"}}},
				YAML:   &fleet.YAMLOptions{},
				Ignore: fleet.IgnoreOptions{Conditions: []map[string]string{{"type": "B"}}},
				Helm: &fleet.HelmOptions{
					ValuesFiles: []string{"v2.yaml"},
					ValuesFrom:  []fleet.ValuesFrom{{SecretKeyRef: &fleet.SecretKeySelector{Name: "s", Key: "k"}}},
				},
			},
			want: fleet.BundleDeploymentOptions{
				Diff:   &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{{Kind: "A"}, {Kind: "B"}}},
				YAML:   &fleet.YAMLOptions{Overlays: []string{"a", "b"}},
				Ignore: fleet.IgnoreOptions{Conditions: []map[string]string{{"type": "B"}}},
				Helm: &fleet.HelmOptions{
					ValuesFiles: []string{"v2.yaml"},
					ValuesFrom:  []fleet.ValuesFrom{{SecretKeyRef: &fleet.SecretKeySelector{Name: "s", Key: "k"}}},
				},
			},
		},
		{
			name: "helm fields and values",
			base: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
				Chart: "c", Version: "1.0.0", TimeoutSeconds: 60, Atomic: true,
				Values: &fleet.GenericMap{Data: map[string]interface{}{
					"replicas": 1.0,
					"image":    map[string]interface{}{"repo": "r", "tag": "v1"},
					"list":     []interface{}{"a", "b"},
					"m":        map[string]interface{}{"x": 1.0},
				}},
			}},
			override: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
				Version: "2.0.0", ReleaseName: "rel", MaxHistory: 3, DisablePreProcess: true,
				Values: &fleet.GenericMap{Data: map[string]interface{}{
					"image": map[string]interface{}{"tag": "v2", "pullPolicy": "Always"},
					"list":  []interface{}{"c"},
					"m":     "scalar replaces map",
					"extra": nil,
				}},
			}},
			want: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
				Chart: "c", Version: "2.0.0", ReleaseName: "rel", TimeoutSeconds: 60, MaxHistory: 3, Atomic: true, DisablePreProcess: true,
				Values: &fleet.GenericMap{Data: map[string]interface{}{
					"replicas": 1.0,
					"image":    map[string]interface{}{"repo": "r", "tag": "v2", "pullPolicy": "Always"},
					"list":     []interface{}{"c"},
					"m":        "scalar replaces map",
					"extra":    nil,
				}},
			}},
		},
		{
			name:     "helm values over no base values",
			base:     fleet.BundleDeploymentOptions{},
			override: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"a": "b"}}}},
			want:     fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"a": "b"}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			base, override := tt.base.DeepCopy(), tt.override.DeepCopy()
			got := Merge(tt.base, tt.override)
			g.Expect(got).To(Equal(tt.want))
			g.Expect(tt.base).To(Equal(*base), "base unchanged")
			g.Expect(tt.override).To(Equal(*override), "override unchanged")
		})
	}
}

func TestMergeSharesNothing(t *testing.T) {
	g := NewWithT(t)
	base := fleet.BundleDeploymentOptions{
		NamespaceLabels: map[string]string{"a": "1"},
		Helm:            &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"m": map[string]interface{}{"x": 1.0}}}},
	}
	override := fleet.BundleDeploymentOptions{
		NamespaceAnnotations: map[string]string{"n": "1"},
		Helm:                 &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"o": map[string]interface{}{"y": 1.0}}}},
	}
	got := Merge(base, override)
	got.NamespaceLabels["a"] = "changed"
	got.NamespaceAnnotations["n"] = "changed"
	got.Helm.Values.Data["m"].(map[string]interface{})["x"] = 2.0
	got.Helm.Values.Data["o"].(map[string]interface{})["y"] = 2.0
	g.Expect(base.NamespaceLabels["a"]).To(Equal("1"))
	g.Expect(override.NamespaceAnnotations["n"]).To(Equal("1"))
	g.Expect(base.Helm.Values.Data["m"]).To(Equal(map[string]interface{}{"x": 1.0}))
	g.Expect(override.Helm.Values.Data["o"]).To(Equal(map[string]interface{}{"y": 1.0}))
}
