package join

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/backoff"
	"github.com/gitfleet/fleet/agent/upstream"
	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/registration"
)

// Options configure registration.
type Options struct {
	// Namespace is the agent's system namespace downstream.
	Namespace string
	// Local is a client of the agent's own cluster.
	Local client.Client
	// MinBackoff and MaxBackoff bound the waits between attempts.
	MinBackoff, MaxBackoff time.Duration
}

// Ensure returns a working credential, registering when needed. It returns
// only with a credential or when ctx ends.
func Ensure(ctx context.Context, o Options) (*upstream.Credential, error) {
	if o.MinBackoff == 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = time.Minute
	}
	b := &backoff.Backoff{Min: o.MinBackoff, Max: o.MaxBackoff}
	for {
		cred, err := attempt(ctx, o)
		if err == nil {
			return cred, nil
		}
		if !b.Wait(ctx, 0, "Registration is not complete, retrying", err) {
			return nil, ctx.Err()
		}
	}
}

func attempt(ctx context.Context, o Options) (*upstream.Credential, error) {
	log := ctrl.LoggerFrom(ctx)
	stored, err := upstream.LoadStored(ctx, o.Local, o.Namespace)
	if err != nil {
		return nil, err
	}
	var boot *agentinstall.Bootstrap
	secret := &corev1.Secret{}
	err = o.Local.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: fleet.AgentBootstrapSecretName}, secret)
	switch {
	case apierrors.IsNotFound(err):
		secret = nil
	case err != nil:
		return nil, err
	default:
		if boot, err = agentinstall.ReadBootstrap(secret); err != nil {
			return nil, err
		}
	}

	// fallback is the stored credential to go on with when registering
	// with a new bootstrap fails: one the manager did not reject.
	var fallback, proof *upstream.Credential
	if stored != nil {
		checkErr := upstream.Check(ctx, stored)
		rejectedErr := errors.Is(checkErr, upstream.ErrRejected)
		switch {
		case secret == nil && checkErr == nil:
			return stored, nil
		case secret == nil && !rejectedErr:
			// The manager is unreachable: keep the credential and let the
			// caller retry its connections; registering again would not help.
			log.Info("Manager not reachable, using the stored credential", "reason", checkErr.Error())
			return stored, nil
		case secret == nil:
			log.Info("Stored credential no longer works, registering again", "reason", checkErr.Error())
		case checkErr == nil:
			// A bootstrap placed beside a working credential: somebody wants
			// the cluster registered again, with this manager (a new token)
			// or another one (a new URL or CA). With this manager, the
			// working credential is the proof that the cluster's own agent
			// asks (see proveRenewal).
			log.Info("A new bootstrap was placed beside a working credential, registering with it")
			fallback = stored
			if sameManager(stored, boot) {
				proof = stored
			}
		case !rejectedErr:
			log.Info("Manager not reachable, registering with the new bootstrap", "reason", checkErr.Error())
			fallback = stored
		default:
			log.Info("Stored credential no longer works, registering again", "reason", checkErr.Error())
		}
	}
	if secret == nil {
		return nil, fmt.Errorf("no credential and no %s/%s secret: apply a registration token (fleet install agent-token; for a cluster that was registered before and lost its credential, fleet install agent-token --cluster NAME)", o.Namespace, fleet.AgentBootstrapSecretName)
	}
	cred, err := register(ctx, o, boot, proof)
	if err != nil && fallback != nil {
		// The bootstrap stays: the next start of the agent tries it again.
		log.Info("Could not register with the new bootstrap, going on with the stored credential", "reason", err.Error())
		return fallback, nil
	}
	if err != nil {
		return nil, err
	}
	// The grant is made: a failure to keep it (the cluster's API server busy
	// for a moment) is retried here, not by registering all over again.
	keep := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 10, Cap: 10 * time.Second}
	if err := retry.OnError(keep, func(error) bool { return ctx.Err() == nil }, func() error { return upstream.Store(ctx, o.Local, o.Namespace, cred) }); err != nil {
		return nil, err
	}
	// Forget the token: only the per-cluster credential stays in the cluster.
	if err := o.Local.Delete(ctx, secret, client.Preconditions{UID: &secret.UID}); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("deleting the bootstrap secret: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Registered", "cluster", cred.Namespace+"/"+cred.ClusterName, "clusterNamespace", cred.ClusterNamespace)
	return cred, nil
}

// sameManager tells whether boot registers with the manager cred works
// with, in the same workspace: only there can cred prove anything.
func sameManager(cred *upstream.Credential, boot *agentinstall.Bootstrap) bool {
	return cred.APIServerURL == boot.APIServerURL && cred.Namespace == boot.ClusterNamespace
}

// proveRenewal writes, with the agent's working credential, the hash of the
// new request's clientRandom onto its check-in Lease in its cluster
// namespace (fleet.RenewalHashAnnotation). Only the Cluster's own agent can
// write there, so the manager lets a registration whose clientRandom matches
// take the Cluster over again even with a generic registration token, which
// on its own may not re-register a Cluster whose agent has checked in.
func proveRenewal(ctx context.Context, cred *upstream.Credential, clientRandom string) error {
	c, err := upstream.NewClient(cred.RESTConfig())
	if err != nil {
		return err
	}
	err = checkin.Write(ctx, c, cred.ClusterNamespace, coordinationv1.LeaseSpec{},
		map[string]string{fleet.RenewalHashAnnotation: registration.RenewalHash(clientRandom)})
	if err != nil {
		return fmt.Errorf("proving with the stored credential that this cluster's agent registers again (Lease %s/%s): %w",
			cred.ClusterNamespace, fleet.AgentLeaseName, err)
	}
	return nil
}

// Identity is the cluster's identity: the configured client ID, or the UID of
// the kube-system namespace, which survives re-installs of the agent.
func Identity(ctx context.Context, local client.Client, cfg *agentinstall.AgentConfig) (string, error) {
	if cfg.ClientID != "" {
		return cfg.ClientID, nil
	}
	ns := &corev1.Namespace{}
	if err := local.Get(ctx, types.NamespacedName{Name: "kube-system"}, ns); err != nil {
		return "", fmt.Errorf("reading the kube-system namespace for the cluster identity: %w", err)
	}
	return string(ns.UID), nil
}

// register asks the manager for a credential and waits for it: the grant
// seals it to a key made for this request (internal/registration.Seal) in
// the registration's status.
//
// With proof, the credential the agent holds for the same Cluster of the
// same manager, the request is proven to come from the Cluster's own agent
// first (proveRenewal).
func register(ctx context.Context, o Options, boot *agentinstall.Bootstrap, proof *upstream.Credential) (*upstream.Credential, error) {
	// How long this registration has taken, its request's create included,
	// paces the polls for the grant (pollWait): a create that took seconds
	// (the API servers busy, the request queued or refused with 429 and
	// retried) says the grant will not come within the next second either.
	started := time.Now()
	cm := &corev1.ConfigMap{}
	if err := o.Local.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: fleet.AgentName}, cm); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		cm = nil
	}
	cfg, err := agentinstall.ReadConfig(cm)
	if err != nil {
		return nil, err
	}
	clientID, err := Identity(ctx, o.Local, cfg)
	if err != nil {
		return nil, err
	}
	// The API server's 429s come back to these loops, which spread their
	// retries (withPacing, retryWait).
	manager, err := upstream.NewClient(withPacing(upstream.WithTLSMode(upstream.Config(boot.APIServerURL, []byte(boot.APIServerCA), boot.Token), cfg.AgentTLSMode)))
	if err != nil {
		return nil, fmt.Errorf("manager API server %s: %w", boot.APIServerURL, err)
	}
	// The key the credential is sealed to: in memory for this request only.
	key, err := registration.NewKey()
	if err != nil {
		return nil, err
	}
	random := make([]byte, 16)
	_, _ = rand.Read(random)
	clientRandom := hex.EncodeToString(random)
	if proof != nil {
		if proof.ClientID != "" && proof.ClientID != clientID {
			return nil, fmt.Errorf("the stored credential was granted to client ID %s, and this cluster is %s now: it proves nothing", proof.ClientID, clientID)
		}
		if err := proveRenewal(ctx, proof, clientRandom); err != nil {
			return nil, err
		}
	}
	reg := &fleet.ClusterRegistration{
		ObjectMeta: metav1.ObjectMeta{
			// Named after this request, so that a create retried after a
			// timeout finds the one the API server made meanwhile instead
			// of making a second registration.
			Name:      RequestName(clientID, clientRandom),
			Namespace: boot.ClusterNamespace,
			Labels:    map[string]string{fleet.RegistrationTokenLabel: boot.TokenName},
			// The manager's finalizer (deleting the registration revokes its
			// credential) comes with the request: the manager adds it if
			// missing, but that is one more write per registration.
			Finalizers: []string{fleet.RegistrationFinalizer},
		},
		Spec: fleet.ClusterRegistrationSpec{ClientID: clientID, ClientRandom: clientRandom, ClusterLabels: cfg.Labels,
			PublicKey: registration.EncodePublicKey(key)},
	}
	// Proves that this request was made with the token its label names
	// (any token may name any other).
	registration.Prove(boot.Token, reg)
	if err := createRequest(ctx, manager, reg); err != nil {
		return nil, explain("creating the cluster registration", err)
	}
	ctrl.LoggerFrom(ctx).Info("Created cluster registration, waiting for the manager to grant it", "registration", reg.Namespace+"/"+reg.Name, "clientID", clientID)

	// Short polls first: the grant usually comes within a second or two,
	// and a long sleep past it is what registration latency is made of. When
	// it takes longer, thousands of clusters are registering at once: the
	// polls thin out rather than slow the grants down further (pollWait).
	b := &backoff.Backoff{Min: 250 * time.Millisecond, Max: 3 * time.Second}
	// The request is waited for as long as it is there and the bootstrap
	// it was made with is too: a new request would wait in the same queue
	// and cost the manager a second grant (see stillWaiting).
	check := time.Now().Add(stillWaitingEvery)
	var missingSince time.Time
	refused := ""
	for {
		var throttled error
		got := &fleet.ClusterRegistration{}
		// Served from the API server's watch cache (resourceVersion 0): many
		// agents waiting at once must not each reach etcd on every poll. The
		// token may get a registration by name, never list or watch them.
		err := manager.Get(ctx, client.ObjectKeyFromObject(reg), got, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}})
		switch {
		case err == nil && got.Status.SealedCredential != "":
			sealed, err := registration.Open(key, reg.Namespace, reg.Name, got.Status.SealedCredential)
			if err != nil {
				return nil, fmt.Errorf("registration %s/%s: %w", reg.Namespace, reg.Name, err)
			}
			cred := &upstream.Credential{
				APIServerURL:     boot.APIServerURL,
				APIServerCA:      []byte(boot.APIServerCA),
				Token:            sealed.Token,
				ClusterName:      sealed.ClusterName,
				ClusterNamespace: sealed.ClusterNamespace,
				Namespace:        sealed.Namespace,
				ClientID:         clientID,
				TLSMode:          cfg.AgentTLSMode,
			}
			if sealed.APIServerURL != "" {
				cred.PublishedURL, cred.PublishedCA = sealed.APIServerURL, []byte(sealed.APIServerCA)
			}
			return cred, nil
		case err == nil:
			if c := meta.FindStatusCondition(got.Status.Conditions, fleet.ConditionAccepted); c != nil && c.Status == metav1.ConditionFalse && c.Message != refused {
				// The message says what to do; the request stays, and is
				// granted if that is done in time.
				refused = c.Message
				ctrl.LoggerFrom(ctx).Info("The manager refused the registration", "registration", reg.Namespace+"/"+reg.Name, "reason", c.Reason, "message", c.Message)
			}
		case apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err):
			return nil, explain("waiting for the grant", err)
		case apierrors.IsNotFound(err):
			// Not in the watch cache yet, or deleted (stillWaiting).
			if missingSince.IsZero() {
				missingSince = time.Now()
			}
		default:
			// The API server is busy (429) or unreachable for a moment: keep
			// waiting for this registration rather than make another one,
			// which would only add to the manager's work.
			throttled = err
			ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the grant", "reason", err.Error())
		}
		if err == nil {
			missingSince = time.Time{}
		}
		if time.Now().After(check) {
			if err := stillWaiting(ctx, o, manager, reg, boot, missingSince, refused); err != nil {
				return nil, err
			}
			check = time.Now().Add(stillWaitingEvery)
		}
		wait := pollWait(b, time.Since(started))
		if throttled != nil {
			wait = max(wait, retryWait(throttled, 0))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// stillWaitingEvery is how often a registration waiting for its grant
// checks that it is worth waiting for (stillWaiting).
const stillWaitingEvery = 5 * time.Minute

// stillWaiting tells whether to go on waiting for the grant of reg: an
// error (start again from the bootstrap) when the bootstrap Secret it was
// made with was replaced or removed, or when reg is gone (missing from the
// watch cache since missingSince, and from etcd); else it logs that the
// request is still waiting. A grant that is merely slow (thousands of
// clusters registering at once, the manager granting them one after the
// other) is waited for: giving up on it for a new request would put the
// agent at the back of the queue and have the manager grant both.
func stillWaiting(ctx context.Context, o Options, manager client.Client, reg *fleet.ClusterRegistration, boot *agentinstall.Bootstrap, missingSince time.Time, refused string) error {
	secret := &corev1.Secret{}
	err := o.Local.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: fleet.AgentBootstrapSecretName}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the %s/%s secret was removed while registration %s/%s waited for its grant: registering again from what is there now", o.Namespace, fleet.AgentBootstrapSecretName, reg.Namespace, reg.Name)
	case err == nil:
		now, err := agentinstall.ReadBootstrap(secret)
		if err != nil || *now != *boot {
			return fmt.Errorf("the %s/%s secret changed while registration %s/%s waited for its grant: registering with the new one", o.Namespace, fleet.AgentBootstrapSecretName, reg.Namespace, reg.Name)
		}
	}
	if !missingSince.IsZero() && time.Since(missingSince) > time.Minute {
		// Not in the watch cache for a minute: ask etcd.
		err := manager.Get(ctx, client.ObjectKeyFromObject(reg), &fleet.ClusterRegistration{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("registration %s/%s is gone (deleted before it was granted): making a new one", reg.Namespace, reg.Name)
		}
	}
	kv := []any{"registration", reg.Namespace + "/" + reg.Name}
	if refused != "" {
		kv = append(kv, "refused", refused)
	}
	ctrl.LoggerFrom(ctx).Info("Still waiting for the manager to grant the registration: is the manager running? (many clusters registering at once are granted one after the other)", kv...)
	return nil
}

// createRequest creates reg, retrying what is transient: a 429 after the
// wait the API server asked for, spread out (retryWait), for as long as it
// keeps asking, within createPatience; other transient errors up to six
// times, with a growing backoff.
func createRequest(ctx context.Context, manager client.Client, reg *fleet.ClusterRegistration) error {
	b := &backoff.Backoff{Min: 500 * time.Millisecond, Max: 10 * time.Second}
	deadline := time.Now().Add(createPatience)
	failures := 0
	for {
		err := manager.Create(ctx, reg.DeepCopy())
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil // AlreadyExists: ours, an earlier try was made after all
		}
		if !transient(err) {
			return err
		}
		if _, paced := apierrors.SuggestsClientDelay(err); !paced {
			failures++
		}
		if failures >= 6 || time.Now().After(deadline) {
			return err
		}
		if !backoff.Sleep(ctx, retryWait(err, b.Next())) {
			return ctx.Err()
		}
	}
}

// createPatience bounds how long a registration's create is retried while
// the API server asks to wait.
const createPatience = 15 * time.Minute

// pollWait is the wait before the next look at a registration that has
// taken so long so far (its request's create included): b's short, growing
// waits first, then about a third of that time, at most maxPollWait.
// Thousands of agents registering at once (after an outage, or a fleet
// installed in one go) share the API server with the grants they wait for,
// and with their requests' own creates in the same priority level: their
// polls grow geometrically fewer with the wait, where a fixed interval adds
// the same load for as long as the queue lasts. A grant is seen at most
// about a third of the wait late.
func pollWait(b *backoff.Backoff, waited time.Duration) time.Duration {
	d := b.Next()
	if third := waited / 3; third > d {
		// The same jitter as b's: agents that started together spread out.
		d = time.Duration(float64(third) * (0.75 + mrand.Float64()/4)) //nolint:gosec // G404: jitter only spreads load, it guards nothing
	}
	return min(d, maxPollWait)
}

// maxPollWait bounds pollWait.
const maxPollWait = 15 * time.Second

// RequestName is the name of the ClusterRegistration of one request.
func RequestName(clientID, clientRandom string) string {
	sum := sha256.Sum256([]byte(clientID + "\x00" + clientRandom))
	return "request-" + hex.EncodeToString(sum[:])[:16]
}

// transient tells an error worth retrying as is: the API server busy,
// timing out or out of reach for a moment.
func transient(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || errors.Is(err, context.DeadlineExceeded) ||
		isNetError(err)
}

// isNetError tells a network timeout; a refused connection is not retried
// here (the manager is not there: the caller's slower backoff applies).
func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// explain turns API errors into what a person should do.
func explain(what string, err error) error {
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: the registration token was rejected (Unauthorized): it has expired or was revoked; apply a fresh one made with `fleet install agent-token`", what)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: the registration token may not do this (Forbidden): %v", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
