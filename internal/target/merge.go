package target

import (
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Merge returns base with override's options laid over it, the way a target's
// options customize a bundle's. The result shares no memory with either input.
//
// The rules, field by field:
//   - strings and numbers: a non-empty, non-zero override replaces;
//   - booleans: true in the override sets true; an override cannot turn a
//     base true off, since false and unset look the same (createNamespace,
//     a pointer, is the exception: a set override replaces);
//   - maps (namespaceLabels, namespaceAnnotations, helm.templateValues):
//     merged, override wins per key;
//   - lists (ignore.conditions, diff.comparePatches, yaml.overlays,
//     helm.valuesFiles, helm.valuesFrom): a non-empty override replaces the
//     whole list;
//   - pointers to structs (correctDrift, diff, kustomize, yaml, helm): merged
//     field by field with these same rules;
//   - helm.values: deep-merged; nested maps merge recursively and any other
//     override value (scalar, list, null) replaces.
func Merge(base, override fleet.BundleDeploymentOptions) fleet.BundleDeploymentOptions {
	out := *base.DeepCopy()
	o := override.DeepCopy() // so that out may take o's maps and lists as they are

	setString(&out.DefaultNamespace, o.DefaultNamespace)
	setString(&out.TargetNamespace, o.TargetNamespace)
	setString(&out.ServiceAccount, o.ServiceAccount)
	setBool(&out.KeepResources, o.KeepResources)
	setBool(&out.DeleteNamespace, o.DeleteNamespace)
	setBool(&out.DeleteCRDResources, o.DeleteCRDResources)
	if o.CreateNamespace != nil {
		// A pointer, so that an override may say false as well as true.
		out.CreateNamespace = o.CreateNamespace
	}
	out.NamespaceLabels = mergeStrings(out.NamespaceLabels, o.NamespaceLabels)
	out.NamespaceAnnotations = mergeStrings(out.NamespaceAnnotations, o.NamespaceAnnotations)
	if o.ForceSyncGeneration != 0 {
		out.ForceSyncGeneration = o.ForceSyncGeneration
	}
	if len(o.Ignore.Conditions) > 0 {
		out.Ignore.Conditions = o.Ignore.Conditions
	}
	if o.CorrectDrift != nil {
		if out.CorrectDrift == nil {
			out.CorrectDrift = &fleet.CorrectDrift{}
		}
		setBool(&out.CorrectDrift.Enabled, o.CorrectDrift.Enabled)
		setBool(&out.CorrectDrift.Force, o.CorrectDrift.Force)
		setBool(&out.CorrectDrift.KeepFailHistory, o.CorrectDrift.KeepFailHistory)
	}
	if o.Diff != nil {
		if out.Diff == nil {
			out.Diff = &fleet.DiffOptions{}
		}
		if len(o.Diff.ComparePatches) > 0 {
			out.Diff.ComparePatches = o.Diff.ComparePatches
		}
	}
	if o.Kustomize != nil {
		if out.Kustomize == nil {
			out.Kustomize = &fleet.KustomizeOptions{}
		}
		setString(&out.Kustomize.Dir, o.Kustomize.Dir)
	}
	if o.YAML != nil {
		if out.YAML == nil {
			out.YAML = &fleet.YAMLOptions{}
		}
		if len(o.YAML.Overlays) > 0 {
			out.YAML.Overlays = o.YAML.Overlays
		}
	}
	if o.Helm != nil {
		if out.Helm == nil {
			out.Helm = &fleet.HelmOptions{}
		}
		mergeHelm(out.Helm, o.Helm)
	}
	return out
}

// mergeHelm merges o into out; both are private copies.
func mergeHelm(out, o *fleet.HelmOptions) {
	setString(&out.Chart, o.Chart)
	setString(&out.Repo, o.Repo)
	setString(&out.ReleaseName, o.ReleaseName)
	setString(&out.Version, o.Version)
	if o.TimeoutSeconds != 0 {
		out.TimeoutSeconds = o.TimeoutSeconds
	}
	if o.MaxHistory != 0 {
		out.MaxHistory = o.MaxHistory
	}
	if o.Values != nil && len(o.Values.Data) > 0 {
		if out.Values == nil || out.Values.Data == nil {
			out.Values = &fleet.GenericMap{Data: map[string]interface{}{}}
		}
		MergeValues(out.Values.Data, o.Values.Data)
	}
	out.TemplateValues = mergeStrings(out.TemplateValues, o.TemplateValues)
	if len(o.ValuesFiles) > 0 {
		out.ValuesFiles = o.ValuesFiles
	}
	if len(o.ValuesFrom) > 0 {
		out.ValuesFrom = o.ValuesFrom
	}
	setBool(&out.Force, o.Force)
	setBool(&out.TakeOwnership, o.TakeOwnership)
	setBool(&out.Atomic, o.Atomic)
	setBool(&out.WaitForJobs, o.WaitForJobs)
	setBool(&out.DisablePreProcess, o.DisablePreProcess)
	setBool(&out.DisableDNS, o.DisableDNS)
	setBool(&out.SkipSchemaValidation, o.SkipSchemaValidation)
	setBool(&out.DisableDependencyUpdate, o.DisableDependencyUpdate)
}

// MergeValues deep-merges Helm values from override into dst, in place: where
// both hold a map under a key the maps merge recursively, otherwise the
// override's value replaces. dst takes override's values without copying
// them; pass a copy if override is still used elsewhere.
func MergeValues(dst, override map[string]interface{}) {
	for k, v := range override {
		if vm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				MergeValues(dm, vm)
				continue
			}
		}
		dst[k] = v
	}
}

func setString(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

func setBool(dst *bool, v bool) {
	if v {
		*dst = true
	}
}

// mergeStrings merges o into out (a private copy, possibly nil), o winning.
func mergeStrings(out, o map[string]string) map[string]string {
	if len(o) == 0 {
		return out
	}
	if out == nil {
		return o
	}
	for k, v := range o {
		out[k] = v
	}
	return out
}
