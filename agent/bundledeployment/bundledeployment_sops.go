package bundledeployment

import (
	"context"
	"crypto/ecdh"

	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/sops"
)

// deployable tells whether the BundleDeployment may be deployed now: it is
// not paused, in its deployment window, waits for nothing and names a
// deploymentID.
func deployable(s *scope) bool {
	bd := s.bd
	return !bd.Spec.Paused && !bd.Spec.OffSchedule && len(s.waiting) == 0 && bd.Spec.DeploymentID != ""
}

// needsDeploy tells whether this reconcile is to install or upgrade the
// release: it is deployable and its deploymentID is not yet deployed.
func needsDeploy(s *scope) bool {
	if !deployable(s) {
		return false
	}
	id := s.bd.Spec.DeploymentID
	return !release.UpToDate(s.state.deployed, id) || !release.UpToDate(s.state.last, id)
}

// loadContent reads the resources of the deploymentID about to be deployed
// and opens the SOPS files among them with the agent's keys, before
// anything of the bundle (its downstreamResources included) reaches the
// cluster: a file that does not open deploys nothing.
func (r *Reconciler) loadContent(ctx context.Context, s *scope) error {
	if !needsDeploy(s) {
		return nil
	}
	return r.openContent(ctx, s)
}

// openContent reads the BundleDeployment's resources and opens its SOPS
// files into s.resources.
func (r *Reconciler) openContent(ctx context.Context, s *scope) error {
	resources, err := r.content(ctx, s.bd)
	if err == nil {
		var keys []*ecdh.PrivateKey
		if r.SealingKeys != nil {
			keys = r.SealingKeys()
		}
		resources, err = OpenSOPS(resources, keys)
	}
	if err != nil {
		s.deployErr = err
		return err
	}
	s.resources, s.loaded = resources, true
	return nil
}

// OpenSOPS returns resources with every SOPS-encrypted file opened with
// keys; resources itself is left as it is (the Content cache shares it).
// A file that does not open is a Stalling error naming the file and why:
// the bundle's author must encrypt it for this cluster (or fix it).
func OpenSOPS(resources []fleet.BundleResource, keys []*ecdh.PrivateKey) ([]fleet.BundleResource, error) {
	var out []fleet.BundleResource
	for i, res := range resources {
		data, err := content.DecodeResource(res)
		if err != nil {
			return nil, outcome.Stall(fleet.ReasonInvalidBundle, err)
		}
		if !sops.Encrypted(res.Name, data) {
			continue
		}
		plain, err := sops.Decrypt(res.Name, data, keys)
		if err != nil {
			return nil, outcome.Stallf(fleet.ReasonSOPSUnreadable,
				"SOPS file %s does not open on this cluster: %v; nothing of the bundle is deployed", res.Name, err)
		}
		opened, err := content.EncodeResource(res.Name, plain)
		clear(plain)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = append([]fleet.BundleResource(nil), resources...)
		}
		out[i] = opened
	}
	if out == nil {
		return resources, nil
	}
	return out, nil
}
