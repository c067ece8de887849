package deployer

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Render returns the objects the release of a BundleDeployment would hold,
// built as Deploy builds them (chart, kustomization, overlays, values,
// forced namespace, release labels) but without a cluster: Helm renders
// client-only, as `helm template` does, CRDs and hooks included. Values are
// helm.values only: helm.valuesFrom names objects of the downstream cluster,
// which Render does not read. scope says which kinds are namespaced;
// OfflineScope knows the built-in kinds. Objects come back in the order
// Helm installs them, hooks last.
func Render(ctx context.Context, in Input, scope Scope) ([]*unstructured.Unstructured, error) {
	key := ReleaseFor(in.Name, in.Options)
	layout, err := Detect(in.Files, in.Options)
	if err != nil {
		return nil, err
	}
	ch, err := BuildChart(in.Files, layout, in.Options, key.Name)
	if err != nil {
		return nil, err
	}
	if err := checkCRDs(ch, in.Options.TargetNamespace); err != nil {
		return nil, err
	}
	values := map[string]interface{}{}
	if h := in.Options.Helm; h != nil && h.Values != nil {
		values = MergeValues(values, h.Values.DeepCopy().Data)
	}
	pr := &postRenderer{
		files: in.Files, layout: layout, kustomize: layout.Style == StyleHelm && layout.HasKustomize,
		target: Target{ReleaseName: key.Name, ReleaseNamespace: key.Namespace, ForceNamespace: in.Options.TargetNamespace,
			KeepCRDs: !in.Options.DeleteCRDResources},
		scope: scope,
	}
	i := action.NewInstall(&action.Configuration{Log: func(string, ...interface{}) {}})
	i.ReleaseName, i.Namespace = key.Name, key.Namespace
	i.DryRun, i.ClientOnly, i.Replace, i.IncludeCRDs = true, true, true, true
	i.PostRenderer = pr
	if h := in.Options.Helm; h != nil {
		i.SkipSchemaValidation, i.EnableDNS = h.SkipSchemaValidation, !h.DisableDNS
	}
	rel, err := i.RunWithContext(ctx, ch, values)
	if err != nil {
		return nil, err
	}
	objs, err := decodeObjects([]byte(rel.Manifest))
	if err != nil {
		return nil, fmt.Errorf("reading the rendered manifests: %w", err)
	}
	// Helm does not post-render hooks; neither does an install, so they are
	// shown as the release would hold them.
	for _, h := range rel.Hooks {
		hooks, err := decodeObjects([]byte(h.Manifest))
		if err != nil {
			return nil, fmt.Errorf("reading hook %s: %w", h.Path, err)
		}
		objs = append(objs, hooks...)
	}
	return objs, nil
}

// clusterScoped are the built-in kinds that are not namespaced, by group and
// kind.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}: true, {Kind: "Node"}: true, {Kind: "PersistentVolume"}: true, {Kind: "ComponentStatus"}: true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "policy", Kind: "PodSecurityPolicy"}:                                      true,
	{Group: "gateway.networking.k8s.io", Kind: "GatewayClass"}:                        true,
	{Group: "fleet.cattle.io", Kind: "Content"}:                                       true,
}

// OfflineScope is a Scope for rendering without a cluster: the built-in
// cluster-scoped kinds are cluster-scoped, every other kind is taken as
// namespaced, as Deploy takes a kind the cluster does not serve yet.
func OfflineScope(gvk schema.GroupVersionKind) (namespaced, known bool) {
	return !clusterScoped[gvk.GroupKind()], true
}
