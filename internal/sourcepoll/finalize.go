package sourcepoll

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Finalize lets obj, which is being deleted, go once the Bundles it made
// are gone: it deletes the Bundles of its namespace labelled label=its name
// (listed through reader, uncached, so that none is missed), runs cleanup
// (nil for none), then removes finalizer. kind names obj in errors and the
// log. An object without the finalizer is left alone.
func Finalize(ctx context.Context, c client.Client, reader client.Reader, obj client.Object, kind, finalizer, label string, cleanup func() error) error {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	bundles := &fleet.BundleList{}
	if err := reader.List(ctx, bundles, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{label: obj.GetName()}); err != nil {
		return fmt.Errorf("listing the bundles of deleted %s %s: %w", kind, obj.GetName(), err)
	}
	for i := range bundles.Items {
		b := &bundles.Items[i]
		if err := client.IgnoreNotFound(c.Delete(ctx, b)); err != nil {
			return fmt.Errorf("deleting bundle %s of deleted %s %s: %w", b.Name, kind, obj.GetName(), err)
		}
	}
	if len(bundles.Items) > 0 {
		ctrl.LoggerFrom(ctx).Info("Deleted the bundles of a deleted "+kind, "object", klog.KObj(obj), "bundles", len(bundles.Items))
	}
	if cleanup != nil {
		if err := cleanup(); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(obj, finalizer)
	return client.IgnoreNotFound(c.Update(ctx, obj))
}
