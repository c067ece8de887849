package registration

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationv1ac "k8s.io/client-go/applyconfigurations/coordination/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	internalregistration "github.com/gitfleet/fleet/internal/registration"
)

// Keys of the downstream fleet-agent Secret that stores the credential.
const (
	APIServerURLKey     = "apiServerURL"
	APIServerCAKey      = "apiServerCA"
	TokenKey            = "token"
	ClusterNameKey      = "clusterName"
	ClusterNamespaceKey = "clusterNamespace"
	NamespaceKey        = "namespace"
	ClientIDKey         = "clientID"
	// PublishedURLKey and PublishedCAKey hold the address the manager told
	// the agent with its grant (absent when it told none).
	PublishedURLKey = "publishedAPIServerURL"
	PublishedCAKey  = "publishedAPIServerCA"
)

// Credential is what a registered agent uses to talk to the manager.
type Credential struct {
	APIServerURL string
	APIServerCA  []byte
	Token        string
	// ClusterName and Namespace name the agent's Cluster upstream.
	ClusterName string
	Namespace   string
	// ClusterNamespace holds the agent's BundleDeployments.
	ClusterNamespace string
	ClientID         string

	// current, set by NewRotator, is the token in use since the last
	// rotation; Token is then the one the credential started with.
	current *currentToken
	// PublishedURL and PublishedCA are the address the manager said, with
	// the grant, that agents reach it at: followed like the one it publishes
	// in the cluster namespace (Follow), which it writes only once the
	// address changes.
	PublishedURL string
	PublishedCA  []byte
}

// RESTConfig builds a client config for the manager's API server. Once a
// Rotator rotates the credential, requests of the configs it built carry the
// new token.
func (c *Credential) RESTConfig() *rest.Config {
	if c.current == nil {
		return restConfig(c.APIServerURL, c.APIServerCA, c.Token)
	}
	cfg := restConfig(c.APIServerURL, c.APIServerCA, "")
	cfg.WrapTransport = c.current.wrap
	return cfg
}

// CurrentToken is the token in use: the latest rotated one, if any.
func (c *Credential) CurrentToken() string {
	if c.current == nil {
		return c.Token
	}
	return c.current.get()
}

func restConfig(url string, ca []byte, token string) *rest.Config {
	return &rest.Config{
		Host:            url,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		Timeout:         30 * time.Second,
		UserAgent:       "fleet-agent",
	}
}

// Options configure registration.
type Options struct {
	// Namespace is the agent's system namespace downstream.
	Namespace string
	// Local is a client of the agent's own cluster.
	Local client.Client
	// MinBackoff and MaxBackoff bound the waits between attempts.
	MinBackoff, MaxBackoff time.Duration
}

// Scheme knows core types and fleet's. It is built once and shared by every
// client the agent makes (building one takes about 1.5 ms of CPU and many
// allocations, and thousands of agents registering at once in one process
// spent a fifth of their CPU on it): add nothing to it (NewScheme).
func Scheme() *runtime.Scheme { return sharedScheme() }

var sharedScheme = sync.OnceValue(NewScheme)

// NewScheme builds a scheme like Scheme's, for a caller that adds kinds.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = fleet.AddToScheme(s)
	return s
}

// UpstreamMapper maps the kinds an agent uses on the manager's API server
// to their resources without asking it: discovery would be two more
// requests per agent, and thousands of agents start at once after an outage
// or an install.
func UpstreamMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	add := func(gv schema.GroupVersion, kind string, scope meta.RESTScope) {
		plural, singular := meta.UnsafeGuessKindToResource(gv.WithKind(kind))
		m.AddSpecific(gv.WithKind(kind), plural, singular, scope)
		// Caches ask about lists by their own kind.
		m.AddSpecific(gv.WithKind(kind+"List"), plural, singular, scope)
	}
	for _, kind := range []string{"ClusterRegistration", "Cluster", "BundleDeployment"} {
		add(fleet.GroupVersion, kind, meta.RESTScopeNamespace)
	}
	add(fleet.GroupVersion, "Content", meta.RESTScopeRoot)
	for _, kind := range []string{"Secret", "ConfigMap", "ServiceAccount"} {
		add(corev1.SchemeGroupVersion, kind, meta.RESTScopeNamespace)
	}
	add(coordinationv1.SchemeGroupVersion, "Lease", meta.RESTScopeNamespace)
	return m
}

// NewUpstreamClient is a client of the manager's API server.
func NewUpstreamClient(cfg *rest.Config) (client.WithWatch, error) {
	return client.NewWithWatch(cfg, client.Options{Scheme: Scheme(), Mapper: UpstreamMapper()})
}

// Backoff yields capped, jittered exponential waits.
type Backoff struct {
	Min, Max time.Duration
	attempt  int
}

// Next returns the wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	d := float64(b.Min) * math.Pow(2, float64(b.attempt))
	if d > float64(b.Max) || math.IsInf(d, 0) {
		d = float64(b.Max)
	} else {
		b.attempt++
	}
	// Full jitter in [d/2, d): many agents coming back at once spread out.
	return time.Duration(d/2 + mrand.Float64()*d/2)
}

// Reset starts over after a success.
func (b *Backoff) Reset() { b.attempt = 0 }

// Repeat runs step until ctx ends. After a success it waits what step
// returned; after a failure it logs what failed and waits the next backoff,
// at most ceiling when ceiling > 0.
func Repeat(ctx context.Context, b *Backoff, ceiling time.Duration, failed string, step func(context.Context) (time.Duration, error)) {
	log := ctrl.LoggerFrom(ctx)
	for {
		wait, err := step(ctx)
		if err != nil {
			wait = b.Next()
			if ceiling > 0 {
				wait = min(wait, ceiling)
			}
			log.Info(failed, "reason", err.Error(), "retryIn", wait.Round(time.Millisecond))
		} else {
			b.Reset()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Ensure returns a working credential, registering when needed. It returns
// only with a credential or when ctx ends.
func Ensure(ctx context.Context, o Options) (*Credential, error) {
	log := ctrl.LoggerFrom(ctx)
	if o.MinBackoff == 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = time.Minute
	}
	b := &Backoff{Min: o.MinBackoff, Max: o.MaxBackoff}
	for {
		cred, err := attempt(ctx, o)
		if err == nil {
			return cred, nil
		}
		wait := b.Next()
		log.Info("Registration is not complete, retrying", "reason", err.Error(), "retryIn", wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// ErrRejected marks a credential the manager refuses (Unauthorized or Forbidden).
var ErrRejected = errors.New("rejected by the manager")

func attempt(ctx context.Context, o Options) (*Credential, error) {
	log := ctrl.LoggerFrom(ctx)
	stored, err := LoadStored(ctx, o.Local, o.Namespace)
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
	var fallback, proof *Credential
	if stored != nil {
		checkErr := Check(ctx, stored)
		rejectedErr := errors.Is(checkErr, ErrRejected)
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
	if err := retry.OnError(keep, func(error) bool { return ctx.Err() == nil }, func() error { return store(ctx, o, cred) }); err != nil {
		return nil, err
	}
	// Forget the token: only the per-cluster credential stays in the cluster.
	if err := o.Local.Delete(ctx, secret, client.Preconditions{UID: &secret.UID}); client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("deleting the bootstrap secret: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Registered", "cluster", cred.Namespace+"/"+cred.ClusterName, "clusterNamespace", cred.ClusterNamespace)
	return cred, nil
}

// sameManager tells whether boot registers with the manager cred works
// with, in the same workspace: only there can cred prove anything.
func sameManager(cred *Credential, boot *agentinstall.Bootstrap) bool {
	return cred.APIServerURL == boot.APIServerURL && cred.Namespace == boot.ClusterNamespace
}

// proveRenewal writes, with the agent's working credential, the hash of the
// new request's clientRandom onto its check-in Lease in its cluster
// namespace (fleet.RenewalHashAnnotation). Only the Cluster's own agent can
// write there, so the manager lets a registration whose clientRandom matches
// take the Cluster over again even with a generic registration token, which
// on its own may not re-register a Cluster whose agent has checked in.
func proveRenewal(ctx context.Context, cred *Credential, clientRandom string) error {
	c, err := NewUpstreamClient(cred.RESTConfig())
	if err != nil {
		return err
	}
	err = WriteLease(ctx, c, cred.ClusterNamespace, coordinationv1.LeaseSpec{},
		map[string]string{fleet.RenewalHashAnnotation: internalregistration.RenewalHash(clientRandom)})
	if err != nil {
		return fmt.Errorf("proving with the stored credential that this cluster's agent registers again (Lease %s/%s): %w",
			cred.ClusterNamespace, fleet.AgentLeaseName, err)
	}
	return nil
}

// WriteLease merges spec's fields that are set and annotations into the
// agent's check-in Lease in clusterNamespace, creating it when there is none
// yet: one request when it exists, which it does after the first check-in.
func WriteLease(ctx context.Context, c client.Client, clusterNamespace string, spec coordinationv1.LeaseSpec, annotations map[string]string) error {
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

// LeaseFieldManager is the field manager of the check-ins that apply the
// agent's Lease (ApplyLease).
const LeaseFieldManager = "fleet-agent"

// ApplyLease sets spec's fields that are set and annotations on the agent's
// check-in Lease in clusterNamespace with a server-side apply: one request
// whether the Lease exists or not, where WriteLease costs a refused one
// (404, then a create) when it does not. The fields it applied before and
// leaves out now are removed; fields others wrote (such as the renewal
// proof's annotation) stay.
func ApplyLease(ctx context.Context, c client.Client, clusterNamespace string, spec coordinationv1.LeaseSpec, annotations map[string]string) error {
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
	return c.Apply(ctx, lease, client.FieldOwner(LeaseFieldManager), client.ForceOwnership)
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
func register(ctx context.Context, o Options, boot *agentinstall.Bootstrap, proof *Credential) (*Credential, error) {
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
	upstream, err := NewUpstreamClient(restConfig(boot.APIServerURL, []byte(boot.APIServerCA), boot.Token))
	if err != nil {
		return nil, fmt.Errorf("manager API server %s: %w", boot.APIServerURL, err)
	}
	// The key the credential is sealed to: in memory for this request only.
	key, err := internalregistration.NewKey()
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
			PublicKey: internalregistration.EncodePublicKey(key)},
	}
	// Proves that this request was made with the token its label names
	// (any token may name any other).
	internalregistration.Prove(boot.Token, reg)
	create := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 6, Cap: 10 * time.Second}
	err = retry.OnError(create, transient, func() error {
		err := upstream.Create(ctx, reg.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			return nil // ours: an earlier try was made after all
		}
		return err
	})
	if err != nil {
		return nil, explain("creating the cluster registration", err)
	}
	ctrl.LoggerFrom(ctx).Info("Created cluster registration, waiting for the manager to grant it", "registration", reg.Namespace+"/"+reg.Name, "clientID", clientID)

	// Short polls first: the grant usually comes within a second or two,
	// and a long sleep past it is what registration latency is made of. When
	// it takes longer, thousands of clusters are registering at once: the
	// polls thin out rather than slow the grants down further (pollWait).
	b := &Backoff{Min: 250 * time.Millisecond, Max: 3 * time.Second}
	deadline := time.Now().Add(5 * time.Minute)
	refused := ""
	for {
		got := &fleet.ClusterRegistration{}
		// Served from the API server's watch cache (resourceVersion 0): many
		// agents waiting at once must not each reach etcd on every poll. The
		// token may get a registration by name, never list or watch them.
		err := upstream.Get(ctx, client.ObjectKeyFromObject(reg), got, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}})
		switch {
		case err == nil && got.Status.SealedCredential != "":
			sealed, err := internalregistration.Open(key, reg.Namespace, reg.Name, got.Status.SealedCredential)
			if err != nil {
				return nil, fmt.Errorf("registration %s/%s: %w", reg.Namespace, reg.Name, err)
			}
			cred := &Credential{
				APIServerURL:     boot.APIServerURL,
				APIServerCA:      []byte(boot.APIServerCA),
				Token:            sealed.Token,
				ClusterName:      sealed.ClusterName,
				ClusterNamespace: sealed.ClusterNamespace,
				Namespace:        sealed.Namespace,
				ClientID:         clientID,
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
			// Not in the watch cache yet.
		default:
			// The API server is busy (429) or unreachable for a moment: keep
			// waiting for this registration rather than make another one,
			// which would only add to the manager's work.
			ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the grant", "reason", err.Error())
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("registration %s/%s was not granted within 5 minutes: is the manager running?", reg.Namespace, reg.Name)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pollWait(b, time.Since(started))):
		}
	}
}

// pollWait is the wait before the next look at a registration that has
// taken so long so far (its request's create included): b's short, growing
// waits first, then about a third of that time, at most maxPollWait.
// Thousands of agents registering at once (after an outage, or a fleet
// installed in one go) share the API server with the grants they wait for,
// and with their requests' own creates in the same priority level: their
// polls grow geometrically fewer with the wait, where a fixed interval adds
// the same load for as long as the queue lasts. A grant is seen at most
// about a third of the wait late.
func pollWait(b *Backoff, waited time.Duration) time.Duration {
	d := b.Next()
	if third := waited / 3; third > d {
		// The same jitter as b's: agents that started together spread out.
		d = time.Duration(float64(third) * (0.75 + mrand.Float64()/4))
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

// Check tells whether the manager accepts a credential: it lists the agent's
// BundleDeployments, which both authenticates and authorizes.
func Check(ctx context.Context, cred *Credential) error {
	c, err := NewUpstreamClient(cred.RESTConfig())
	if err != nil {
		return err
	}
	list := &fleet.BundleDeploymentList{}
	return rejected(c.List(ctx, list, client.InNamespace(cred.ClusterNamespace), client.Limit(1)))
}

// rejected marks an Unauthorized or Forbidden error with ErrRejected.
func rejected(err error) error {
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return fmt.Errorf("%w: %v", ErrRejected, err)
	}
	return err
}

// LoadStored reads the fleet-agent Secret; nil when there is none.
func LoadStored(ctx context.Context, local client.Client, namespace string) (*Credential, error) {
	secret := &corev1.Secret{}
	err := local.Get(ctx, types.NamespacedName{Namespace: namespace, Name: fleet.AgentName}, secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d := secret.Data
	cred := &Credential{
		APIServerURL:     string(d[APIServerURLKey]),
		APIServerCA:      d[APIServerCAKey],
		Token:            string(d[TokenKey]),
		ClusterName:      string(d[ClusterNameKey]),
		ClusterNamespace: string(d[ClusterNamespaceKey]),
		Namespace:        string(d[NamespaceKey]),
		ClientID:         string(d[ClientIDKey]),
		PublishedURL:     string(d[PublishedURLKey]),
		PublishedCA:      d[PublishedCAKey],
	}
	if cred.APIServerURL == "" || cred.Token == "" || cred.ClusterNamespace == "" {
		return nil, nil
	}
	return cred, nil
}

func store(ctx context.Context, o Options, cred *Credential) error {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: fleet.AgentName, Labels: map[string]string{agentinstall.ManagedByLabel: "fleet"}},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			APIServerURLKey:     []byte(cred.APIServerURL),
			APIServerCAKey:      cred.APIServerCA,
			TokenKey:            []byte(cred.CurrentToken()),
			ClusterNameKey:      []byte(cred.ClusterName),
			ClusterNamespaceKey: []byte(cred.ClusterNamespace),
			NamespaceKey:        []byte(cred.Namespace),
			ClientIDKey:         []byte(cred.ClientID),
		},
	}
	if cred.PublishedURL != "" {
		secret.Data[PublishedURLKey], secret.Data[PublishedCAKey] = []byte(cred.PublishedURL), cred.PublishedCA
	}
	err := o.Local.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		existing := &corev1.Secret{}
		if err := o.Local.Get(ctx, client.ObjectKeyFromObject(secret), existing); err != nil {
			return err
		}
		existing.Data = secret.Data
		err = o.Local.Update(ctx, existing)
	}
	if err != nil {
		return fmt.Errorf("storing the credential in %s/%s: %w", o.Namespace, fleet.AgentName, err)
	}
	return nil
}
