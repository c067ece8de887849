package target

import (
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Merge returns base with override's options laid over it, the way a target's
// options customize a bundle's, as Fleet merges them. The result shares no
// memory with either input.
//
// The rules, field by field:
//   - strings and numbers: a non-empty, non-zero override replaces
//     (helm.timeoutSeconds: a negative override resets it to none);
//   - booleans: true in the override sets true; an override cannot turn a
//     base true off, since false and unset look the same (createNamespace,
//     a pointer, is the exception: a set override replaces);
//   - maps (namespaceLabels, namespaceAnnotations, helm.templateValues):
//     merged, override wins per key;
//   - yaml.overlays: the override's are appended to the base's, so a
//     customization adds its overlays to the bundle's;
//   - diff.comparePatches and helm.valuesFrom: merged by what they name (the
//     object, or the ConfigMap or Secret key): an override entry replaces the
//     base entry naming the same, in its place, and the others are appended;
//   - ignore.conditions and helm.valuesFiles: a non-empty override replaces
//     the whole list;
//   - correctDrift: a set override replaces it whole, so a customization may
//     turn drift correction off;
//   - pointers to other structs (diff, kustomize, yaml, helm): merged field by
//     field with these same rules;
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
		out.CorrectDrift = o.CorrectDrift
	}
	if o.Diff != nil {
		if out.Diff == nil {
			out.Diff = &fleet.DiffOptions{}
		}
		out.Diff.ComparePatches = mergeByKey(out.Diff.ComparePatches, o.Diff.ComparePatches, comparePatchKey)
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
		out.YAML.Overlays = append(out.YAML.Overlays, o.YAML.Overlays...)
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
	switch {
	case o.TimeoutSeconds > 0:
		out.TimeoutSeconds = o.TimeoutSeconds
	case o.TimeoutSeconds < 0:
		out.TimeoutSeconds = 0
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
	out.ValuesFrom = mergeByKey(out.ValuesFrom, o.ValuesFrom, valuesFromKey)
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

// mergeByKey merges override into base (a private copy) by key: an override
// entry replaces the base entry of its key where that stands, the first of
// the override's entries of one key counting; the others, and every entry
// whose key is empty, are appended in order.
func mergeByKey[T any](base, override []T, key func(T) string) []T {
	if len(override) == 0 {
		return base
	}
	at := make(map[string]int, len(base))
	for i, v := range base {
		if k := key(v); k != "" {
			at[k] = i
		}
	}
	seen := map[string]bool{}
	for _, v := range override {
		k := key(v)
		if k != "" {
			if seen[k] {
				continue
			}
			seen[k] = true
			if i, ok := at[k]; ok {
				base[i] = v
				continue
			}
		}
		base = append(base, v)
	}
	return base
}

// comparePatchKey is the object a compare patch is for.
func comparePatchKey(p fleet.ComparePatch) string {
	return p.APIVersion + "|" + p.Kind + "|" + p.Namespace + "|" + p.Name
}

// valuesFromKey is the ConfigMap or Secret key a values source reads; a
// source naming neither has none.
func valuesFromKey(v fleet.ValuesFrom) string {
	switch {
	case v.ConfigMapKeyRef != nil:
		r := v.ConfigMapKeyRef
		return "configmap|" + r.Namespace + "|" + r.Name + "|" + r.Key
	case v.SecretKeyRef != nil:
		r := v.SecretKeyRef
		return "secret|" + r.Namespace + "|" + r.Name + "|" + r.Key
	}
	return ""
}
