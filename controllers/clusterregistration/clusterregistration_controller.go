package clusterregistration

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/metrics"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/secretmeta"
)

// Reconciler grants ClusterRegistrations.
type Reconciler struct {
	Client client.Client
	// APIReader reads around the cache: a namespace the cache does not show
	// may only be too new to be there yet. It reads the Secrets the
	// manager's cache does not hold: a token's values, an agent's renewal
	// Secret written by an earlier version (controllers.CacheOptions).
	APIReader client.Reader
	// Secrets watches the metadata of Secrets: when an agent's last token
	// was issued is read there, without reading the token (default: a
	// watch of its own).
	Secrets *secretmeta.Watch
	// Recorder, when set, gets a Warning event for each registration
	// refused (SetupWithManager defaults it). Grants, thousands at once,
	// record none.
	Recorder events.EventRecorder
	// SystemRegistrationNamespace held the credential secrets of earlier
	// versions, which are removed.
	SystemRegistrationNamespace string
	// AgentNamespace holds the agents' ServiceAccounts, and nothing else
	// (default names.AgentIdentityNamespace of the default system
	// namespace); EnsureSharedRoles makes it and binds its group.
	AgentNamespace string
	// APIServerURL and APIServerCA are the address agents reach the manager
	// at (its --api-server-url and CA), told to each agent in its sealed
	// credential; with no URL, agents keep their token's.
	APIServerURL string
	APIServerCA  []byte
	// CredentialLifetime is how long an agent credential is valid.
	CredentialLifetime time.Duration
	// CredentialRenewAfter is how old an agent's newest token gets before
	// the manager issues the next one (renewal.go); 0 means half of
	// CredentialLifetime. Agents switch to it when a third of their token's
	// lifetime remains (by default), so it must be less than two thirds.
	CredentialRenewAfter time.Duration
	// Workers is the number of registrations reconciled at once.
	Workers int
	// Now is the clock (tests may replace it).
	Now func() time.Time
}

// DefaultCredentialLifetime is the default of Reconciler.CredentialLifetime:
// agents renew their token when a third of it remains.
const DefaultCredentialLifetime = 30 * 24 * time.Hour

// SetupWithManager registers the controller and its indexes.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.AgentNamespace == "" {
		r.AgentNamespace = names.AgentIdentityNamespace(fleet.DefaultSystemNamespace)
	}
	if r.CredentialLifetime == 0 {
		r.CredentialLifetime = DefaultCredentialLifetime
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("fleet-clusterregistration")
	}
	if r.Secrets == nil {
		var err error
		if r.Secrets, err = secretmeta.ForManager(mgr); err != nil {
			return err
		}
	}
	if err := IndexClientID(ctx, mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleet.ClusterRegistration{}).
		Named("clusterregistration").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// IndexClientID adds the spec.clientID index on Clusters and registrations.
func IndexClientID(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &fleet.Cluster{}, fleet.ClientIDIndex, func(o client.Object) []string {
		if id := o.(*fleet.Cluster).Spec.ClientID; id != "" {
			return []string{id}
		}
		return nil
	}); err != nil {
		return err
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &fleet.ClusterRegistration{}, fleet.ClientIDIndex, func(o client.Object) []string {
		if id := o.(*fleet.ClusterRegistration).Spec.ClientID; id != "" {
			return []string{id}
		}
		return nil
	})
}

// scope is what the phases of one reconcile share.
type scope struct {
	reg        *fleet.ClusterRegistration
	token      *fleet.ClusterRegistrationToken // the token the registration names
	cluster    *fleet.Cluster                  // found, or to be created when new is set
	newCluster bool
	// namespaceMade is set when the cache holds the cluster namespace,
	// made for this Cluster.
	namespaceMade bool
	clusterNS     string
	// saName names the agent's ServiceAccount and bindings: a hash of the
	// grant, set once the Cluster is known.
	saName string
	// secretName named the credential secret of earlier versions.
	secretName string
	// bearer is the agent's token, minted by the grant, and sealed its
	// credential sealed to the request's key.
	bearer, sealed string
	// granted is set when this reconcile granted the registration.
	granted bool
	// requeueAfter is when to look again after a reconcile that succeeded.
	requeueAfter time.Duration
}

type phase func(context.Context, *scope) error

// Reconcile grants a registration once, then expires its credential
// secret. The phases only say how they ended; the status (Granted,
// ClusterName and the Accepted condition) is computed from that once, and
// patched once when it changed: a grant costs one status write.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	reg := &fleet.ClusterRegistration{}
	if err := r.Client.Get(ctx, req.NamespacedName, reg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &scope{reg: reg, secretName: names.CredentialSecret(reg.Spec.ClientID, reg.Spec.ClientRandom)}
	if !reg.DeletionTimestamp.IsZero() {
		return outcome.Result(r.reconcileDelete(ctx, s), 0)
	}

	if !reg.Status.Granted {
		if dropped, err := r.dropAbandoned(ctx, reg); dropped || err != nil {
			return ctrl.Result{}, err
		}
	}

	before := reg.DeepCopy()
	var err error
	defer func() { res, retErr = r.end(ctx, s, before, err) }()
	phases := []phase{r.reconcileLegacyCredential, r.reconcileRenewal}
	if !reg.Status.Granted {
		phases = []phase{
			// Checks first: a registration refused, or waiting for the
			// bound, leaves no Cluster, namespace or RBAC behind.
			r.validate,
			r.reconcileToken,
			r.findCluster,
			r.checkNamespace,
			r.reconcileFinalizer,
			// The grant.
			r.reconcileAgentAccess,
			r.sealCredential,
			r.replaceOlder,
			r.markGranted,
		}
	}
	for _, p := range phases {
		if err = p(ctx, s); err != nil {
			break
		}
	}
	return res, retErr
}

// end computes the status from how the phases ended; outcome records a
// refusal once, when it is news (grants, thousands at once, record none),
// writes the status when it changed and decides the result; the written
// grants and refusals are counted.
func (r *Reconciler) end(ctx context.Context, s *scope, before *fleet.ClusterRegistration, err error) (ctrl.Result, error) {
	reg := s.reg
	clusterName, sealed := "", ""
	if s.granted {
		clusterName, sealed = s.cluster.Name, s.sealed
	}
	reg.Status = nextStatus(before.Status, reg.Generation, clusterName, sealed, err, r.Now())
	res, rerr := outcome.Compute(ctx, outcome.Input{Object: reg, Err: err, After: s.requeueAfter, Recorder: r.Recorder,
		Before: before.Status.Conditions, Events: []outcome.Watch{{Condition: fleet.ConditionAccepted, Action: "Register", Kind: refusal}}})
	changed := !equality.Semantic.DeepEqual(before.Status, reg.Status)
	werr := outcome.PatchStatus(ctx, r.Client, before, reg)
	if changed && werr == nil {
		// Counted once written: a grant whose status write failed is made
		// again.
		if outcome.IsStalling(err) {
			metrics.Registrations.WithLabelValues(metrics.ResultRefused, outcome.ReasonOf(err, fleet.ReasonError)).Inc()
		}
		if s.granted {
			metrics.Registrations.WithLabelValues(metrics.ResultGranted, fleet.ReasonGranted).Inc()
		}
	}
	if s.granted {
		ctrl.LoggerFrom(ctx).Info("Granted cluster registration", "registration", klog.KObj(reg), "cluster", klog.KObj(s.cluster))
	}
	return outcome.Written(res, rerr, werr)
}

// refusal is the event a change of Accepted deserves: a Warning for a new
// refusal, nothing for a grant.
func refusal(was, now *metav1.Condition) string {
	if kind := outcome.ConditionEvent(was, now); kind == corev1.EventTypeWarning {
		return kind
	}
	return ""
}
