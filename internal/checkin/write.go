package checkin

import (
	"context"
	"encoding/json"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1ac "k8s.io/client-go/applyconfigurations/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// The agent's side: it writes its Lease with its own credential, which may
// create Leases in its cluster namespace and patch only its own.

// FieldManager is the field manager of the check-ins that apply the agent's
// Lease (Apply).
const FieldManager = "fleet-agent"

// Write merges spec's fields that are set and annotations into the agent's
// check-in Lease in clusterNamespace, creating it when there is none yet:
// one request when it exists, which it does after the first check-in.
func Write(ctx context.Context, c client.Client, clusterNamespace string, spec coordinationv1.LeaseSpec, annotations map[string]string) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNamespace, Name: fleet.AgentLeaseName, Annotations: annotations}, Spec: spec}
	body := map[string]any{"spec": spec}
	if len(annotations) > 0 {
		// Only those given: a null would delete the others.
		body["metadata"] = map[string]any{"annotations": annotations}
	}
	patch, err := json.Marshal(body)
	if err != nil {
		return err
	}
	for range 2 {
		err = c.Patch(ctx, lease.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
		if !apierrors.IsNotFound(err) {
			return err
		}
		err = c.Create(ctx, lease.DeepCopy())
		if !apierrors.IsAlreadyExists(err) {
			return err // created, or failed
		}
		// Made meanwhile (by a check-in racing a renewal proof): patch it.
	}
	return err
}

// Apply sets spec's fields that are set and annotations on the agent's
// check-in Lease in clusterNamespace with a server-side apply: one request
// whether the Lease exists or not, where Write costs a refused one (404,
// then a create) when it does not. The fields it applied before and leaves
// out now are removed; fields others wrote (such as the renewal proof's
// annotation) stay.
func Apply(ctx context.Context, c client.Client, clusterNamespace string, spec coordinationv1.LeaseSpec, annotations map[string]string) error {
	s := coordinationv1ac.LeaseSpec()
	if spec.HolderIdentity != nil {
		s.WithHolderIdentity(*spec.HolderIdentity)
	}
	if spec.LeaseDurationSeconds != nil {
		s.WithLeaseDurationSeconds(*spec.LeaseDurationSeconds)
	}
	if spec.RenewTime != nil {
		s.WithRenewTime(*spec.RenewTime)
	}
	lease := coordinationv1ac.Lease(fleet.AgentLeaseName, clusterNamespace).WithSpec(s)
	if len(annotations) > 0 {
		lease.WithAnnotations(annotations)
	}
	// Forced: Leases written before by merge patches own these fields under
	// another manager; the agent's Lease is the agent's alone.
	return c.Apply(ctx, lease, client.FieldOwner(FieldManager), client.ForceOwnership)
}
