package deployer

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// DefaultValuesKey is the key read from a valuesFrom ConfigMap or Secret
// that names none.
const DefaultValuesKey = "values.yaml"

// Values merges a release's values as Fleet does: helm.values (its
// valuesFiles merged in, and templated per cluster, by the manager), then
// each valuesFrom entry over them in order, so that a value kept in the
// cluster wins over the repository's. An entry naming both a ConfigMap and a
// Secret reads both, the Secret merged last so that it wins, as in Fleet.
// valuesFrom objects are read from the agent's own cluster; a source without
// a namespace is read from the release namespace, and so is one that
// downstreamResources copies there (Fleet's rule: its namespace is the
// source's upstream, where the copy is not).
func Values(ctx context.Context, local client.Reader, opts fleet.BundleDeploymentOptions, releaseNamespace string) (map[string]interface{}, error) {
	merged := map[string]interface{}{}
	h := opts.Helm
	if h == nil {
		return merged, nil
	}
	if h.Values != nil {
		merged = MergeValues(merged, h.Values.DeepCopy().Data)
	}
	for i, from := range h.ValuesFrom {
		if from.ConfigMapKeyRef == nil && from.SecretKeyRef == nil {
			return nil, outcome.Stallf(fleet.ReasonInvalidValues, "helm.valuesFrom[%d]: set configMapKeyRef or secretKeyRef", i)
		}
		sources := []fleet.ValuesFrom{}
		if from.ConfigMapKeyRef != nil {
			sources = append(sources, fleet.ValuesFrom{ConfigMapKeyRef: from.ConfigMapKeyRef})
		}
		if from.SecretKeyRef != nil {
			sources = append(sources, fleet.ValuesFrom{SecretKeyRef: from.SecretKeyRef})
		}
		for _, src := range sources {
			data, err := readValuesFrom(ctx, local, src, releaseNamespace, opts.DownstreamResources)
			if err != nil {
				return nil, fmt.Errorf("helm.valuesFrom[%d]: %w", i, err)
			}
			var v map[string]interface{}
			if err := yaml.Unmarshal(data, &v); err != nil {
				return nil, outcome.Stallf(fleet.ReasonInvalidValues, "helm.valuesFrom[%d]: not YAML values: %w", i, err)
			}
			merged = MergeValues(merged, v)
		}
	}
	return merged, nil
}

// ValuesFromNamespace is the namespace a valuesFrom source of kind and name
// is read from downstream: the release namespace when the source names none
// or when downstreamResources copies an object of that kind and name there
// (whatever namespace it names: the Rancher UI fills in the source's own),
// else the namespace it names.
func ValuesFromNamespace(kind, name, namespace, releaseNamespace string, copied []fleet.DownstreamResource) string {
	if namespace == "" || slices.Contains(copied, fleet.DownstreamResource{Kind: kind, Name: name}) {
		return releaseNamespace
	}
	return namespace
}

// readValuesFrom reads the one source from names: its ConfigMap, else its
// Secret.
func readValuesFrom(ctx context.Context, local client.Reader, from fleet.ValuesFrom, releaseNamespace string, copied []fleet.DownstreamResource) ([]byte, error) {
	key := func(k string) string {
		if k == "" {
			return DefaultValuesKey
		}
		return k
	}
	switch {
	case from.ConfigMapKeyRef != nil:
		r := from.ConfigMapKeyRef
		ns := func(n string) string { return ValuesFromNamespace("ConfigMap", r.Name, n, releaseNamespace, copied) }
		cm := &corev1.ConfigMap{}
		if err := local.Get(ctx, client.ObjectKey{Namespace: ns(r.Namespace), Name: r.Name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, outcome.Stallf(fleet.ReasonInvalidValues,
					"configmap %s/%s not found in the cluster: create it there or change helm.valuesFrom", ns(r.Namespace), r.Name)
			}
			return nil, err
		}
		if v, ok := cm.Data[key(r.Key)]; ok {
			return []byte(v), nil
		}
		if v, ok := cm.BinaryData[key(r.Key)]; ok {
			return v, nil
		}
		return nil, outcome.Stallf(fleet.ReasonInvalidValues, "configmap %s/%s has no key %q: add it or change helm.valuesFrom",
			ns(r.Namespace), r.Name, key(r.Key))
	case from.SecretKeyRef != nil:
		r := from.SecretKeyRef
		ns := func(n string) string { return ValuesFromNamespace("Secret", r.Name, n, releaseNamespace, copied) }
		s := &corev1.Secret{}
		if err := local.Get(ctx, client.ObjectKey{Namespace: ns(r.Namespace), Name: r.Name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, outcome.Stallf(fleet.ReasonSecretNotFound,
					"secret %s/%s not found in the cluster: create it there or change helm.valuesFrom", ns(r.Namespace), r.Name)
			}
			return nil, err
		}
		if v, ok := s.Data[key(r.Key)]; ok {
			return v, nil
		}
		return nil, outcome.Stallf(fleet.ReasonInvalidValues, "secret %s/%s has no key %q: add it or change helm.valuesFrom",
			ns(r.Namespace), r.Name, key(r.Key))
	}
	return nil, outcome.Stallf(fleet.ReasonInvalidValues, "set configMapKeyRef or secretKeyRef")
}

// MergeValues merges src into dst as Helm does: maps key by key, anything
// else in src replaces what dst has.
func MergeValues(dst, src map[string]interface{}) map[string]interface{} {
	if dst == nil {
		dst = map[string]interface{}{}
	}
	for k, v := range src {
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				dst[k] = MergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}
