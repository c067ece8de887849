package manageraddress

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/registration"
)

// Reconciler keeps the fleet-manager-address ConfigMap of every cluster
// namespace of a Cluster registered by token (see the package doc).
type Reconciler struct {
	Client client.Client
	// APIReader reads the ConfigMaps, which the manager does not cache.
	APIReader client.Reader
	// APIServerURL and APIServerCA are the address published; with no URL
	// nothing is published (the agents keep the address of their token).
	APIServerURL string
	APIServerCA  []byte
	// Workers is how many Clusters are looked at concurrently (default 1).
	Workers int
}

// SetupWithManager registers the controller. It hears of a Cluster when it
// starts and when the Cluster's cluster namespace or kubeconfig Secret
// changes, never of heartbeats.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIServerURL == "" {
		return fmt.Errorf("publishing the manager's address needs its URL (--api-server-url)")
	}
	changed := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*fleet.Cluster), e.ObjectNew.(*fleet.Cluster)
			return o.Status.Namespace != n.Status.Namespace || o.Spec.KubeConfigSecret != n.Spec.KubeConfigSecret
		},
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("manageraddress").
		For(&fleet.Cluster{}, builder.WithPredicates(changed)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// Desired is the content of the address ConfigMap for a manager at url
// with CA bundle ca.
func Desired(url string, ca []byte) map[string]string {
	return map[string]string{registration.AddressURLKey: url, registration.AddressCAKey: string(ca)}
}

// Reconcile writes the address into the Cluster's cluster namespace when it
// is missing or differs; outcome turns how that ended into the result.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return outcome.Compute(ctx, outcome.Input{Err: r.reconcile(ctx, req)})
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) error {
	c := &fleet.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() || c.Spec.KubeConfigSecret != "" || c.Status.Namespace == "" {
		return nil
	}
	want := Desired(r.APIServerURL, r.APIServerCA)
	key := types.NamespacedName{Namespace: c.Status.Namespace, Name: registration.AddressConfigMap}
	cm := &corev1.ConfigMap{}
	err := r.APIReader.Get(ctx, key, cm)
	switch {
	case apierrors.IsNotFound(err) && c.Annotations[registration.AddressAnnotation] == registration.AddressHash(r.APIServerURL, r.APIServerCA):
		// The agent was told this address with its credential: one write
		// fewer per registration, until the address changes.
		return nil
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{fleet.ManagedLabel: "true"}},
			Data:       want,
		}
		// AlreadyExists (made meanwhile) is retried: it is compared then.
		if err := r.Client.Create(ctx, cm); err != nil {
			return fmt.Errorf("publishing the manager's address in %s: %w", key, err)
		}
		return nil
	case err != nil:
		return err
	}
	if cm.Labels[fleet.ManagedLabel] != "true" {
		// Not ours: the cluster namespace is the manager's, so someone put
		// it there by hand. Leave it; the agent checks whatever it says
		// against the manager before it follows it.
		ctrl.LoggerFrom(ctx).Info("Not publishing the manager's address: the ConfigMap exists and was not made by fleet",
			"reason", fleet.ReasonNotOwned, "configMap", key.String())
		return nil
	}
	if maps.Equal(cm.Data, want) {
		return nil
	}
	cm.Data = want
	if err := r.Client.Update(ctx, cm); err != nil {
		return fmt.Errorf("publishing the manager's new address in %s: %w", key, err)
	}
	ctrl.LoggerFrom(ctx).Info("Published the manager's new address", "configMap", key.String(), "apiServerURL", r.APIServerURL)
	return nil
}
