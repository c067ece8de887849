package agent

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Moving to a new manager while the agent runs. Three things end a run of
// the agent so that the next one starts from registration (runRegistered):
//
//   - a new bootstrap Secret is placed (created or changed): an admin
//     renews the registration or moves the cluster to another manager;
//   - a bootstrap that was tried and failed is still there, and the stored
//     credential does not work either (its manager is gone or unreachable):
//     it is tried again, so that a cluster whose old manager died registers
//     with the new one as soon as that one is reachable, without a restart;
//   - the manager publishes a new address for itself and accepts the
//     credential there (upstream.Follow).
//
// Whatever the agent's watches are doing meanwhile (backing off from a
// manager that is gone), this runs on its own timer against the agent's own
// cluster. Releases stay installed across runs; the next run adopts them.

// errRestart ends one run of the agent to start again from registration.
var errRestart = errors.New("registering again")

// DefaultAddressCheckInterval is how often the agent reads the address its
// manager publishes, unless Options.AddressCheckInterval says otherwise: a
// moved manager keeps its old address working for longer than this.
const DefaultAddressCheckInterval = 15 * time.Minute

// restartWatch says when and how an agent's run looks for a reason to restart.
type restartWatch struct {
	local     client.Client
	namespace string
	// seen is the bootstrap Secret's version when the run started ("" for
	// none): one still there then was tried and failed.
	seen string
	cred *upstream.Credential
	// every is how often the bootstrap Secret is looked at; retryPending
	// how long a failed one waits before it is tried again; addressEvery how
	// often the manager's published address is read.
	every, retryPending, addressEvery time.Duration
}

// bootstrapVersion is the resourceVersion of the bootstrap Secret, "" when
// there is none.
func bootstrapVersion(ctx context.Context, local client.Client, namespace string) (string, error) {
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := local.Get(ctx, client.ObjectKey{Namespace: namespace, Name: fleet.AgentBootstrapSecretName}, secret)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	return secret.GetResourceVersion(), err
}

// wait returns true once the run is to start again from registration, false
// when ctx ends.
func (w *restartWatch) wait(ctx context.Context) bool {
	log := ctrl.LoggerFrom(ctx)
	t := time.NewTicker(w.every)
	defer t.Stop()
	pendingAt := time.Now().Add(w.retryPending)
	// The first look is spread over the interval: agents restarted together
	// do not all ask the manager at once.
	addressAt := time.Now().Add(w.addressEvery/2 + time.Duration(mrand.Int64N(int64(w.addressEvery/2)+1))) //nolint:gosec // G404: jitter only spreads load, it guards nothing
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		v, err := bootstrapVersion(ctx, w.local, w.namespace)
		switch {
		case err != nil:
			log.V(1).Info("Could not look for a new bootstrap secret", "reason", err.Error())
		case v != "" && v != w.seen:
			log.Info("A new bootstrap secret was placed, registering with it")
			return true
		case v != "" && time.Now().After(pendingAt):
			pendingAt = time.Now().Add(w.retryPending)
			if err := upstream.Check(ctx, w.cred); err != nil {
				log.Info("The stored credential does not work and a bootstrap secret is waiting: trying it again", "reason", err.Error())
				return true
			}
		}
		if w.addressEvery > 0 && time.Now().After(addressAt) {
			addressAt = time.Now().Add(w.addressEvery)
			moved, err := upstream.Follow(ctx, w.local, w.namespace, w.cred)
			if err != nil {
				log.Info("Not following the manager's published address", "reason", err.Error())
			}
			if moved {
				return true
			}
		}
	}
}
