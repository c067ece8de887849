package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// FieldOwner is the server-side apply field manager of the fields this
// controller sets on the local objects.
const FieldOwner = "fleet-localcluster"

// Reconciler keeps the local Cluster, its Secret and the default
// ClusterGroup of the local workspace (see the package doc).
type Reconciler struct {
	Client client.Client
	// Namespace holds them (default fleet-local).
	Namespace string
	// APIServerURL and APIServerCA go into the local Cluster's Secret: how
	// its agent, which runs in the manager's cluster, reaches the manager.
	APIServerURL string
	APIServerCA  []byte
}

func (r *Reconciler) namespace() string {
	if r.Namespace == "" {
		return fleet.LocalWorkspace
	}
	return r.Namespace
}

// request is the one request this controller works on: all three objects
// are applied together.
func (r *Reconciler) request() reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.namespace(), Name: fleet.LocalClusterName}}
}

// SetupWithManager registers the controller: it applies the objects once
// when it starts, and again whenever one of them is deleted.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIServerURL == "" {
		return fmt.Errorf("the local cluster needs the URL its agent reaches the manager at")
	}
	toRequest := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{r.request()}
	})
	deleted := func(name string) builder.Predicates {
		return builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
			DeleteFunc: func(e event.DeleteEvent) bool {
				return e.Object.GetNamespace() == r.namespace() && e.Object.GetName() == name
			},
		})
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("localcluster").
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(r.request())
			return nil
		})).
		Watches(&fleet.Cluster{}, toRequest, deleted(fleet.LocalClusterName)).
		Watches(&fleet.ClusterGroup{}, toRequest, deleted(fleet.DefaultClusterGroup)).
		// The manager's cache holds only managed Secrets: one that loses its
		// label is gone for the cache too, and the label is put back.
		Watches(&corev1.Secret{}, toRequest, deleted(fleet.LocalClusterSecretName)).
		Complete(r)
}

// Reconcile applies the local objects, forcing the fields this controller
// sets (as Fleet re-applies them) and leaving every other field alone: the
// import controller's spec.clientID, labels a person added, status.
// outcome turns how that ended into the result.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return outcome.Compute(ctx, outcome.Input{Err: r.reconcile(ctx, req)})
}

func (r *Reconciler) reconcile(ctx context.Context, _ ctrl.Request) error {
	for _, obj := range Objects(r.namespace(), r.APIServerURL, r.APIServerCA) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "status")
		if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying the local cluster's %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}
