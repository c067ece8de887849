package bundle

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// agentSecretIndex indexes Bundles by the Secret ("namespace/name") their
// agents' Secrets are copied or derived from: a HelmOp's
// helmOpOptions.secretName, or the registry Secret of a bundle in OCI
// storage.
const agentSecretIndex = "fleet.agentSecretSource" // #nosec G101 -- an index name, no credential

// agentSecretSource is the Secret ("namespace/name") whose data bundle b's
// agent Secrets carry, "" for none. A named registry Secret outside the
// bundle's namespace is indexed too: registryOf refuses it unless it is the
// manager's own, and a refused bundle is reconciled to say so anyway.
func agentSecretSource(b *fleet.Bundle) string {
	switch {
	case b.Spec.HelmOpOptions != nil:
		if name := b.Spec.HelmOpOptions.SecretName; name != "" {
			return b.Namespace + "/" + name
		}
		return ""
	case b.Spec.ContentsID != "":
		if ref := b.Annotations[fleet.OCIStorageSecretAnnotation]; ref != "" {
			return ref // namespace/name, as registryOf reads it
		}
		return b.Namespace + "/" + fleet.OCIStorageDefaultSecretName
	}
	return ""
}

// indexAgentSecretSource is the agentSecretIndex function.
func indexAgentSecretSource(o client.Object) []string {
	b, ok := o.(*fleet.Bundle)
	if !ok {
		return nil
	}
	if key := agentSecretSource(b); key != "" {
		return []string{key}
	}
	return nil
}

// secretEvents enqueues, for a full pass, the bundles whose agent Secrets
// come from the Secret of an event: a changed credential reaches every
// cluster's copy at once, not at the bundle's next change. The Secrets'
// watch holds metadata only, so any write of the Secret counts.
func (r *Reconciler) secretEvents() handler.TypedEventHandler[*metav1.PartialObjectMetadata, reconcile.Request] {
	add := func(ctx context.Context, o *metav1.PartialObjectMetadata, q queue) {
		for _, key := range r.bundlesUsingSecret(ctx, o.Namespace+"/"+o.Name) {
			r.mem.markRetarget(key)
			q.Add(reconcile.Request{NamespacedName: key})
		}
	}
	return handler.TypedFuncs[*metav1.PartialObjectMetadata, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*metav1.PartialObjectMetadata], q queue) {
			add(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*metav1.PartialObjectMetadata], q queue) {
			if e.ObjectOld.ResourceVersion != e.ObjectNew.ResourceVersion {
				add(ctx, e.ObjectNew, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*metav1.PartialObjectMetadata], q queue) {
			add(ctx, e.Object, q)
		},
	}
}

// bundlesUsingSecret are the bundles indexed under the Secret key.
func (r *Reconciler) bundlesUsingSecret(ctx context.Context, key string) []types.NamespacedName {
	list := &fleet.BundleList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{agentSecretIndex: key}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the bundles that use a Secret failed: their agents' copies follow at their next change", "secret", key)
		return nil
	}
	out := make([]types.NamespacedName, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, client.ObjectKeyFromObject(&list.Items[i]))
	}
	return out
}
