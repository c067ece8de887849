package bundle

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/internal/outcome"
)

// reconcileContent makes sure the bundle's Content exists.
// A bundle in OCI storage has none: its contentsId names the artifact,
// whose registry is read instead.
func (r *Reconciler) reconcileContent(ctx context.Context, s *scope) error {
	s.oci, s.agentSecret = nil, nil
	if s.bundle.Spec.HelmOpOptions != nil {
		return r.helmOpsContent(ctx, s)
	}
	if id := s.bundle.Spec.ContentsID; id != "" {
		if _, err := ocistorage.Digest(id); err != nil {
			return outcome.Stall(fleet.ReasonInvalidBundle, fmt.Errorf("spec.contentsId: %w", err))
		}
		o, err := r.registryOf(ctx, s.bundle)
		if err != nil {
			return err
		}
		s.contentName, s.oci = id, o
		s.agentSecret = o.AgentSecret
		return nil
	}
	name, build, err := content.Encode(s.bundle.Spec.Resources)
	if err != nil {
		return err
	}
	s.contentName = name
	err = r.Client.Get(ctx, client.ObjectKey{Name: name}, &fleet.Content{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	c, err := build()
	if err != nil {
		return err
	}
	if err := r.Client.Create(ctx, c); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating content %s: %w", name, err)
	}
	return nil
}
