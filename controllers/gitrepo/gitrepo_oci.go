package gitrepo

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/bundlereader"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/internal/outcome"
)

// registry is where a GitRepo's bundle contents may go instead of etcd.
type registry struct {
	opts ocistorage.Options
	// secret is the registry Secret, "<namespace>/<name>", which the
	// Bundles name (fleet.OCIStorageSecretAnnotation).
	secret string
	// own: the GitRepo's own (ociRegistrySecret or its namespace's
	// ocistorage Secret), used for every bundle; otherwise the manager's,
	// used above its threshold.
	own bool
	// transport reaches the registry: a tenant's under the egress policy.
	transport *http.Transport
}

// registryFor finds the registry of repo's bundle contents: its
// ociRegistrySecret, else its namespace's ocistorage Secret, else the
// manager's; nil for none. A named Secret that is missing or invalid
// stalls the GitRepo: there is no fallback to etcd, as in Fleet.
func (r *Reconciler) registryFor(ctx context.Context, st *repoState, repo *fleet.GitRepo) (*registry, error) {
	if name := repo.Spec.OCIRegistrySecret; name != "" {
		s, err := r.secret(ctx, st, repo, name, "ociRegistrySecret")
		if err != nil {
			return nil, err
		}
		return r.tenantRegistry(s)
	}
	s, err := r.getSecret(ctx, st, client.ObjectKey{Namespace: repo.Namespace, Name: fleet.OCIStorageDefaultSecretName})
	switch {
	case err == nil:
		return r.tenantRegistry(s)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading Secret %s/%s: %w", repo.Namespace, fleet.OCIStorageDefaultSecretName, err)
	}
	if !r.OCIStorage.Configured() {
		return nil, nil
	}
	s, err = r.getSecret(ctx, st, r.OCIStorage.Secret)
	if err != nil {
		return nil, fmt.Errorf("reading the manager's OCI storage Secret %s: %w", r.OCIStorage.Secret, err)
	}
	o, err := ocistorage.FromSecret(s)
	if err != nil {
		return nil, fmt.Errorf("the manager's OCI storage: %w", err)
	}
	// One repository prefix per namespace, so that a registry with
	// per-repository permissions can tell tenants apart.
	o.Reference += "/" + repo.Namespace
	return &registry{opts: o, secret: r.OCIStorage.Secret.String()}, nil
}

func (r *Reconciler) tenantRegistry(s *corev1.Secret) (*registry, error) {
	o, err := ocistorage.FromSecret(s)
	if err != nil {
		return nil, outcome.Stall(fleet.ReasonInvalidOCIStorage, err)
	}
	return &registry{opts: o, secret: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}.String(), own: true, transport: r.dialer.Transport()}, nil
}

// sizeLimit sets how large a bundle o reads may be: etcd's limit, unless
// every bundle above it goes to reg (the GitRepo's own registry, or the
// manager's with a threshold below etcd's limit); then the registry's,
// fleet-manager --oci-storage-max-bytes.
func (r *Reconciler) sizeLimit(o *bundlereader.Options, reg *registry) {
	o.MaxResourceBytes = bundlereader.DefaultMaxResourceBytes
	o.SizeAdvice = "leave files out with a .fleetignore, split the directory into several bundles, " +
		"or keep the GitRepo's bundle contents in an OCI registry (spec.ociRegistrySecret, see OCI storage in the docs)"
	if reg == nil {
		return
	}
	limit, oci := r.OCIStorage.ReadLimit(reg.own, bundlereader.DefaultMaxResourceBytes)
	if !oci {
		return
	}
	o.MaxResourceBytes = limit
	o.SizeLimit = "the manager's limit for bundles in OCI storage (fleet-manager --oci-storage-max-bytes)"
	o.SizeAdvice = "leave files out with a .fleetignore or split the directory into several bundles"
}

// storeContents pushes the content of each bundle that goes to reg and
// leaves in the Bundle only its contentsId: the resources then never pass
// through etcd.
func (r *Reconciler) storeContents(ctx context.Context, reg *registry, bundles []*fleet.Bundle) error {
	for _, b := range bundles {
		raw, _, err := content.Marshal(b.Spec.Resources)
		if err != nil {
			return err
		}
		if !r.OCIStorage.Use(reg.own, len(raw)) {
			continue
		}
		id := content.ContentsID(raw)
		key := reg.opts.Reference + "/" + id
		if _, done := r.pushed.Load(key); !done {
			if err := reg.opts.Push(ctx, reg.transport, id, raw); err != nil {
				return fmt.Errorf("bundle %s: %w: check the registry and the credentials of Secret %s", b.Name, err, reg.secret)
			}
			r.pushed.Store(key, struct{}{})
		}
		b.Spec.Resources = nil
		b.Spec.ContentsID = id
		if b.Annotations == nil {
			b.Annotations = map[string]string{}
		}
		b.Annotations[fleet.OCIStorageSecretAnnotation] = reg.secret
	}
	return nil
}
