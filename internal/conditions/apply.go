package conditions

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplyStatus writes status, the status fields that owner owns on the object
// gvk/key, with server-side apply. Where several writers share one status
// (the cluster controller, the import controller and the agent on a
// Cluster), each applies only its own fields under its own field owner, so
// that neither a stale cache nor another writer's patch erases them. status
// is any value that marshals to the status object to apply, holding only
// the owner's fields; fields it leaves out that the owner applied before are
// removed. A missing object is not an error: it is gone.
func ApplyStatus(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, key client.ObjectKey, status any, owner string) error {
	metadata := map[string]any{"name": key.Name}
	if key.Namespace != "" {
		metadata["namespace"] = key.Namespace
	}
	b, err := json.Marshal(map[string]any{
		"apiVersion": gvk.GroupVersion().String(),
		"kind":       gvk.Kind,
		"metadata":   metadata,
		"status":     status,
	})
	if err != nil {
		return fmt.Errorf("encoding the status of %s %s: %w", gvk.Kind, key, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return fmt.Errorf("encoding the status of %s %s: %w", gvk.Kind, key, err)
	}
	err = c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(owner), client.ForceOwnership)
	if err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing the status of %s %s: %w", gvk.Kind, key, err))
	}
	return nil
}
