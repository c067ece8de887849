package bundle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/internal/outcome"
)

// registryOf reads the registry of a bundle whose content is in OCI
// storage: the Secret its annotation names, which must be in the bundle's
// namespace or be the manager's own (whose repositories are per
// namespace); without the annotation, the namespace's ocistorage Secret,
// as in Fleet.
func (r *Reconciler) registryOf(ctx context.Context, b *fleet.Bundle) (*ocistorage.Options, error) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: fleet.OCIStorageDefaultSecretName}
	managers := false
	if ref := b.Annotations[fleet.OCIStorageSecretAnnotation]; ref != "" {
		ns, name, _ := strings.Cut(ref, "/")
		key = types.NamespacedName{Namespace: ns, Name: name}
		managers = r.OCIStorageSecret.Name != "" && key == r.OCIStorageSecret
		if !managers && ns != b.Namespace {
			return nil, outcome.Stallf(fleet.ReasonInvalidOCIStorage, "annotation %s names Secret %s, outside the bundle's namespace: name a Secret of namespace %s",
				fleet.OCIStorageSecretAnnotation, ref, b.Namespace)
		}
	}
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, outcome.Stallf(fleet.ReasonSecretNotFound, "the bundle's content %s is in OCI storage and its registry Secret %s is not found: create it", b.Spec.ContentsID, key)
		}
		return nil, fmt.Errorf("reading OCI storage Secret %s: %w", key, err)
	}
	o, err := ocistorage.FromSecret(s)
	if err != nil {
		return nil, outcome.Stall(fleet.ReasonInvalidOCIStorage, err)
	}
	if managers {
		o.Reference += "/" + b.Namespace
	}
	return &o, nil
}

// writeOCISecrets puts, next to each BundleDeployment of a bundle in OCI
// storage, the Secret its agent pulls the content with; next to each of a
// HelmOp's bundle with a helmOpOptions.secretName, the copy of that Secret
// its agent downloads the chart with. Steady passes write nothing: what
// was written is remembered.
func (r *Reconciler) writeOCISecrets(ctx context.Context, s *scope) error {
	if s.agentSecret == nil {
		return r.dropHelmOpsSecrets(ctx, s)
	}
	var fns []func() error
	for _, t := range s.targets {
		if bd := s.existing[t.Namespace]; bd != nil && bd.UID != "" {
			fns = append(fns, func() error { return r.ensureAgentSecret(ctx, s.agentSecret(bd), bd) })
		}
	}
	return r.runParallel(fns)
}

// ensureAgentSecret writes want, the Secret bd's agent reads (an OCI storage
// or a HelmOps access Secret, named after bd), unless already written. A
// Secret of that name of another type is left alone, unless bd owns it
// (the bundle moved from one storage to the other): it is replaced.
func (r *Reconciler) ensureAgentSecret(ctx context.Context, want *corev1.Secret, bd *fleet.BundleDeployment) error {
	key := bd.Namespace + "/" + bd.Name
	stamp := string(bd.UID) + "|" + string(want.Type) + "|" + dataHash(want.Data)
	if v, ok := r.ociSecrets.Load(key); ok && v == stamp {
		return nil
	}
	err := r.Client.Create(ctx, want)
	if apierrors.IsAlreadyExists(err) {
		cur := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), cur); err != nil {
			return fmt.Errorf("reading agent Secret %s: %w", key, err)
		}
		switch {
		case cur.Type != want.Type && !ownedBy(cur, bd):
			return outcome.Stallf(fleet.ReasonNotOwned, "Secret %s exists and is not a %s Secret: rename bundle %s, whose BundleDeployment needs that name", key, want.Type, bd.Name)
		case cur.Type != want.Type:
			// The type of a Secret cannot change.
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, cur)); err != nil {
				return fmt.Errorf("replacing agent Secret %s: %w", key, err)
			}
			err = r.Client.Create(ctx, want)
		case maps.EqualFunc(cur.Data, want.Data, slices.Equal) && slices.Equal(cur.OwnerReferences, want.OwnerReferences):
			err = nil
		default:
			cur.Data, cur.OwnerReferences, cur.Labels = want.Data, want.OwnerReferences, want.Labels
			err = r.Client.Update(ctx, cur)
		}
	}
	if err != nil {
		return fmt.Errorf("writing agent Secret %s: %w", key, err)
	}
	r.ociSecrets.Store(key, stamp)
	return nil
}

// ownedBy tells whether bd is the controller owner of s.
func ownedBy(s *corev1.Secret, bd *fleet.BundleDeployment) bool {
	for _, o := range s.OwnerReferences {
		if o.UID == bd.UID && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

func dataHash(data map[string][]byte) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		fmt.Fprintf(h, "%s=%x;", k, data[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}
