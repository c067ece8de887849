package clusterregistration

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/ensure"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/registration"
	"github.com/gitfleet/fleet/internal/satoken"
)

// Labels naming the registration what a grant wrote is for.
const (
	registrationLabel          = registration.RequestLabel
	registrationNamespaceLabel = registration.RequestNamespaceLabel
)

// managedLabels are on everything a grant writes: the manager deletes or
// rewrites nothing that does not carry them.
func managedLabels(reg *fleet.ClusterRegistration) map[string]string {
	l := ownerLabels(reg)
	l[fleet.RegistrationTokenLabel] = reg.Labels[fleet.RegistrationTokenLabel]
	return l
}

// ownerLabels tell what a grant of reg wrote (earlier versions wrote no
// token label).
func ownerLabels(reg *fleet.ClusterRegistration) map[string]string {
	return map[string]string{fleet.ManagedLabel: "true", registrationLabel: reg.Name, registrationNamespaceLabel: reg.Namespace}
}

// validate refuses a malformed request. The agent cannot fix a request
// after the fact: it registers again with a fresh one.
func (r *Reconciler) validate(_ context.Context, s *scope) error {
	if err := Validate(s.reg); err != nil {
		return outcome.Stallf(fleet.ReasonInvalidRegistration,
			"the registration request is invalid (%v): it was not made by a fleet agent of this version; upgrade the agent, which registers again", err)
	}
	return nil
}

// Validate checks what an agent sent.
func Validate(reg *fleet.ClusterRegistration) error {
	var errs []error
	if reg.Spec.ClientID == "" || len(reg.Spec.ClientID) > 256 {
		errs = append(errs, errors.New("spec.clientID must be set and at most 256 characters"))
	}
	if len(reg.Spec.ClientRandom) < 16 || len(reg.Spec.ClientRandom) > 256 {
		errs = append(errs, errors.New("spec.clientRandom must be 16 to 256 characters"))
	}
	if _, err := registration.ParsePublicKey(reg.Spec.PublicKey); err != nil {
		errs = append(errs, err)
	}
	if reg.Labels[fleet.RegistrationTokenLabel] == "" {
		errs = append(errs, fmt.Errorf("label %s naming the registration token is missing", fleet.RegistrationTokenLabel))
	}
	return errors.Join(errs...)
}

// reconcileToken reads the token the registration names, and checks that
// the registration proves its maker holds it.
func (r *Reconciler) reconcileToken(ctx context.Context, s *scope) error {
	key := types.NamespacedName{Namespace: s.reg.Namespace, Name: s.reg.Labels[fleet.RegistrationTokenLabel]}
	s.token = &fleet.ClusterRegistrationToken{}
	err := r.Client.Get(ctx, key, s.token)
	if apierrors.IsNotFound(err) {
		return outcome.Stallf(fleet.ReasonTokenNotFound,
			"registration token %s does not exist (expired or deleted): make a new one (fleet install agent-token) and apply it to the agent's cluster", key)
	}
	if err != nil {
		return err
	}
	return r.proveToken(ctx, s)
}

// proveToken refuses a registration that does not prove its maker holds the
// token it names (registration.TokenProof): every token may create
// registrations in its namespace and label them with any token's name, and a
// token bound to a Cluster may take that Cluster over. A token past its
// expiry, not yet deleted, grants nothing either.
func (r *Reconciler) proveToken(ctx context.Context, s *scope) error {
	if exp := registration.TokenExpiry(s.token); exp != nil && !r.Now().Before(exp.Time) {
		return outcome.Stallf(fleet.ReasonTokenNotFound,
			"registration token %s/%s expired at %s: make a new one (fleet install agent-token) and apply it to the agent's cluster",
			s.token.Namespace, s.token.Name, exp.UTC().Format(time.RFC3339))
	}
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: s.token.Namespace, Name: names.RegistrationTokenSecret(s.token.Name)}
	// Uncached: the manager's cache holds no Secret of the token's
	// namespace. Once per registration not yet granted.
	err := r.APIReader.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) || (err == nil && !issuedFor(secret, s.token)) {
		// Not issued yet (the agent cannot hold it then), or not by the
		// manager for this token.
		return outcome.Stallf(fleet.ReasonTokenNotProven,
			"registration token %s/%s has no values issued by the manager: nothing can prove holding it", s.token.Namespace, s.token.Name)
	}
	if err != nil {
		return err
	}
	values, err := agentinstall.TokenValues(secret)
	if err != nil {
		return fmt.Errorf("reading the values of registration token %s/%s: %w", s.token.Namespace, s.token.Name, err)
	}
	if !registration.Proven(values.Token, s.reg) {
		return outcome.Stallf(fleet.ReasonTokenNotProven,
			"the registration does not prove it was made with registration token %s (annotation %s): register with that token's own values, with an agent of this version or later",
			s.token.Name, fleet.RegistrationProofAnnotation)
	}
	return nil
}

// issuedFor tells whether secret holds token's values, written by the
// manager: it carries the managed label and token is its controller.
func issuedFor(secret *corev1.Secret, token *fleet.ClusterRegistrationToken) bool {
	ref := metav1.GetControllerOf(secret)
	return secret.Labels[fleet.ManagedLabel] == "true" && ref != nil && ref.UID == token.UID
}

// findCluster finds the Cluster of this identity, or names the one to
// create, and checks that the registration may have it. It writes nothing:
// the grant claims or creates it once admitted.
func (r *Reconciler) findCluster(ctx context.Context, s *scope) error {
	list := &fleet.ClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.reg.Namespace), client.MatchingFields{fleet.ClientIDIndex: s.reg.Spec.ClientID}); err != nil {
		return err
	}
	if len(list.Items) > 0 {
		sort.Slice(list.Items, func(i, j int) bool {
			return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp)
		})
		s.cluster = &list.Items[0]
		return r.checkTakeover(ctx, s)
	}
	name := names.ClusterForClientID(s.reg.Spec.ClientID)
	if bound := registration.BoundCluster(s.token); bound != "" {
		name = bound
	}
	cluster := &fleet.Cluster{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.reg.Namespace, Name: name}, cluster)
	switch {
	case err == nil && cluster.Spec.ClientID != "" && cluster.Spec.ClientID != s.reg.Spec.ClientID:
		return outcome.Stallf(fleet.ReasonIdentityConflict,
			"Cluster %s/%s already belongs to another identity (spec.clientID): delete that Cluster, or give this agent a clientID of its own in its configuration",
			s.reg.Namespace, name)
	case err == nil:
		s.cluster = cluster
		return r.checkTakeover(ctx, s)
	case apierrors.IsNotFound(err):
		// Made with the cluster controller's finalizer, which it would
		// otherwise add straight away: one write fewer per cluster.
		s.cluster = &fleet.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.reg.Namespace, Labels: registration.AllowedLabels(s.reg.Spec.ClusterLabels),
				Finalizers: []string{fleet.ClusterFinalizer}},
			Spec: fleet.ClusterSpec{ClientID: s.reg.Spec.ClientID},
		}
		if r.APIServerURL != "" {
			// The agent is told the manager's address with its credential:
			// controllers/manageraddress publishes it for this Cluster only
			// once it changes.
			s.cluster.Annotations = map[string]string{registration.AddressAnnotation: registration.AddressHash(r.APIServerURL, r.APIServerCA)}
		}
		s.newCluster = true
	default:
		return err
	}
	return nil
}

// checkNamespace refuses, before anything is written, a grant whose
// cluster namespace exists and was not made for this Cluster: fleet never
// adopts a namespace (ensure.Namespace refuses it again when it is made).
func (r *Reconciler) checkNamespace(ctx context.Context, s *scope) error {
	name := names.ClusterNamespaceFor(s.cluster.Namespace, s.cluster.Name, s.cluster.Status.Namespace)
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	s.namespaceMade = ensure.Carries(ns, clusterNamespaceLabels(s.cluster))
	if !s.namespaceMade {
		return outcome.Stallf(fleet.ReasonNamespaceConflict,
			"namespace %s, where Cluster %s/%s would get its deployments, exists and is not labelled for it (%s=%q, %s=%q): fleet does not adopt it; delete or rename that namespace, then register again",
			name, s.cluster.Namespace, s.cluster.Name, fleet.ClusterLabel, ns.Labels[fleet.ClusterLabel], fleet.ClusterNamespaceLabel, ns.Labels[fleet.ClusterNamespaceLabel])
	}
	return nil
}

func clusterNamespaceLabels(cluster *fleet.Cluster) map[string]string {
	return map[string]string{fleet.ManagedLabel: "true", fleet.ClusterLabel: cluster.Name, fleet.ClusterNamespaceLabel: cluster.Namespace}
}

// checkTakeover is checkTakeover on the Cluster found and its agent's
// check-in Lease, read again from the API server before a refusal: the agent
// writes its renewal proof a moment before it asks, and the cache may not
// have seen it yet.
func (r *Reconciler) checkTakeover(ctx context.Context, s *scope) error {
	lease, err := checkin.Lease(ctx, r.Client, s.cluster)
	if err != nil {
		return err
	}
	err = checkTakeover(s.reg, s.token, s.cluster, lease)
	if err == nil || r.APIReader == nil {
		return err
	}
	live := &fleet.Cluster{}
	if rerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.cluster), live); rerr != nil {
		return fmt.Errorf("reading cluster %s/%s again before refusing the registration: %w", s.cluster.Namespace, s.cluster.Name, rerr)
	}
	if live.Spec.ClientID != s.cluster.Spec.ClientID {
		return outcome.Waitf(fleet.ReasonStaleRead, outcome.ConflictWait, "cluster %s/%s changed meanwhile: looking again", live.Namespace, live.Name)
	}
	s.cluster = live
	if lease, err = checkin.Lease(ctx, r.APIReader, live); err != nil {
		return err
	}
	return checkTakeover(s.reg, s.token, s.cluster, lease)
}

// checkTakeover refuses a registration onto a Cluster it may not have. A
// token issued for one Cluster registers that Cluster only. Knowing a
// Cluster's clientID (spec.clientID, readable by many) is no proof of being
// it: once an agent has checked in (its Lease, or status.agent.lastSeen),
// only a token issued for that Cluster (`fleet install agent-token --cluster
// NAME`, or the import controller's), or the agent itself (the renewal hash
// on its check-in Lease, which only its current credential can write, or
// status.agent.renewalHash written by an agent of an earlier version,
// matching the new request) may register onto it again and so revoke the
// credential it holds. A Cluster an admin made ahead of time, which no agent
// has checked in to yet, may be claimed with any token.
func checkTakeover(reg *fleet.ClusterRegistration, token *fleet.ClusterRegistrationToken, cluster *fleet.Cluster, lease *coordinationv1.Lease) error {
	if bound := registration.BoundCluster(token); bound != "" && bound != cluster.Name {
		return outcome.Stallf(fleet.ReasonIdentityConflict,
			"registration token %s was issued for Cluster %s only, and this cluster's identity belongs to Cluster %s: register it with a token issued for %s (fleet install agent-token --cluster %s)",
			token.Name, bound, cluster.Name, cluster.Name, cluster.Name)
	}
	want := registration.RenewalHash(reg.Spec.ClientRandom)
	switch {
	case checkin.Last(cluster, lease).IsZero():
		return nil
	case registration.TokenBoundTo(token, cluster.Name):
		return nil
	case lease != nil && lease.Annotations[fleet.RenewalHashAnnotation] == want:
		return nil
	case cluster.Status.Agent.RenewalHash != "" && cluster.Status.Agent.RenewalHash == want:
		return nil
	}
	return outcome.Stallf(fleet.ReasonIdentityConflict,
		"Cluster %s/%s already has a registered agent, and registration token %s was not issued for it: to register that cluster again (e.g. its agent lost its credential), apply a token issued for it: fleet install agent-token -g %s --cluster %s",
		cluster.Namespace, cluster.Name, token.Name, cluster.Namespace, cluster.Name)
}

// reconcileFinalizer makes sure that deleting the registration revokes the
// credential it is about to get. The agent sets the finalizer itself, which
// saves this write.
func (r *Reconciler) reconcileFinalizer(ctx context.Context, s *scope) error {
	if controllerutil.AddFinalizer(s.reg, fleet.RegistrationFinalizer) {
		return r.Client.Update(ctx, s.reg)
	}
	return nil
}

// reconcileAgentAccess writes the grant: the cluster namespace, the Cluster
// (made or claimed), the agent's ServiceAccount and its one RoleBinding, and
// mints the agent's token. A grant is a chain of round trips, and thousands
// may be waiting: what does not depend on another write is written at once,
// in two rounds, each object with a create (the cache already said it is
// not there; when it is after all, ensureObject reads and corrects it).
//
// The namespace is made before the Cluster, so that the cluster controller,
// which makes it too for Clusters made otherwise, finds it rather than
// racing this create and failing.
//
// The ServiceAccount lives in the agents' namespace (AgentNamespace), whose
// group is bound once to ContentReaderRole; in the cluster namespace one
// RoleBinding to the shared AgentRole names it. No per-agent binding is
// cluster-wide, in the workspace namespace, or anywhere the registration
// token is weighed.
func (r *Reconciler) reconcileAgentAccess(ctx context.Context, s *scope) error {
	s.clusterNS = names.ClusterNamespaceFor(s.cluster.Namespace, s.cluster.Name, s.cluster.Status.Namespace)
	s.saName = names.AgentServiceAccount(s.cluster.Namespace, s.cluster.Name, s.reg.Spec.ClientID, s.reg.Spec.ClientRandom)
	labels := agentLabels(s.reg, s.cluster)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: s.saName, Namespace: r.AgentNamespace}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: s.saName, Namespace: s.clusterNS},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: AgentRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: s.saName, Namespace: r.AgentNamespace}},
	}
	if err := concurrently(
		func() error { return r.ensureClusterNamespace(ctx, s) },
		func() error { return createOrEnsure(ctx, r.Client, labels, sa) },
	); err != nil {
		return err
	}
	return concurrently(
		func() error { return r.reconcileCluster(ctx, s) },
		func() error { return createOrEnsure(ctx, r.Client, labels, binding) },
		func() (err error) {
			s.bearer, err = satoken.Mint(ctx, r.Client, r.AgentNamespace, s.saName, r.CredentialLifetime)
			return err
		},
	)
}

// reconcileCluster claims the Cluster found, or creates it.
func (r *Reconciler) reconcileCluster(ctx context.Context, s *scope) error {
	if s.newCluster {
		err := r.Client.Create(ctx, s.cluster)
		if apierrors.IsAlreadyExists(err) {
			// Made by an earlier try of this grant whose status write failed,
			// or by someone else: looked at again on the retry.
			return outcome.Waitf(fleet.ReasonStaleRead, outcome.ConflictWait, "cluster %s/%s was created meanwhile: looking again", s.cluster.Namespace, s.cluster.Name)
		}
		return err
	}
	if s.cluster.Spec.ClientID != "" {
		return nil
	}
	// A Cluster made ahead of time under this name: claim it.
	patch := client.MergeFrom(s.cluster.DeepCopy())
	s.cluster.Spec.ClientID = s.reg.Spec.ClientID
	return r.Client.Patch(ctx, s.cluster, patch)
}

// ensureClusterNamespace makes the cluster namespace, once: when it exists
// already (the cluster controller made it, or an earlier try of this grant),
// it is read past the cache and its labels checked, rather than failing the
// grant and writing its status twice more.
func (r *Reconciler) ensureClusterNamespace(ctx context.Context, s *scope) error {
	if s.namespaceMade {
		return nil // the cache holds it, made for this Cluster: a Cluster registering again
	}
	labels := clusterNamespaceLabels(s.cluster)
	err := r.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.clusterNS, Labels: labels}})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader
	}
	ns := &corev1.Namespace{}
	if err := reader.Get(ctx, types.NamespacedName{Name: s.clusterNS}, ns); err != nil {
		return err
	}
	if !ensure.Carries(ns, labels) {
		return ensure.Namespace(ctx, r.Client, s.clusterNS, labels) // refuses it, saying why
	}
	return nil
}

// createOrEnsure creates obj, or, when it exists, brings it in line
// (ensureObject): a grant's objects are new, so one request, not three.
func createOrEnsure(ctx context.Context, c client.Client, labels map[string]string, obj client.Object) error {
	create := obj.DeepCopyObject().(client.Object)
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v
	}
	create.SetLabels(l)
	err := c.Create(ctx, create)
	if apierrors.IsAlreadyExists(err) {
		return ensureObject(ctx, c, labels, obj)
	}
	if err != nil {
		return fmt.Errorf("creating %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// agentLabels are on what a grant writes for the agent: the grant's, and the
// Cluster's, by which deleting the Cluster finds its agents' ServiceAccounts
// (controllers/cluster).
func agentLabels(reg *fleet.ClusterRegistration, cluster *fleet.Cluster) map[string]string {
	l := managedLabels(reg)
	l[fleet.ClusterLabel] = cluster.Name
	l[fleet.ClusterNamespaceLabel] = cluster.Namespace
	return l
}

// sealCredential seals the agent's credential to the key of its request:
// the status write that ends the grant carries it.
func (r *Reconciler) sealCredential(_ context.Context, s *scope) error {
	key, err := registration.ParsePublicKey(s.reg.Spec.PublicKey)
	if err != nil {
		return err // validated before: not reached
	}
	s.sealed, err = registration.Seal(key, s.reg.Namespace, s.reg.Name, registration.SealedCredential{
		Token: s.bearer, ClusterName: s.cluster.Name, ClusterNamespace: s.clusterNS, Namespace: s.cluster.Namespace,
		APIServerURL: r.APIServerURL, APIServerCA: string(r.APIServerCA),
	})
	return err
}

// replaceOlder deletes earlier registrations of the same identity; their
// finalizers revoke their credentials.
func (r *Reconciler) replaceOlder(ctx context.Context, s *scope) error {
	list := &fleet.ClusterRegistrationList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.reg.Namespace), client.MatchingFields{fleet.ClientIDIndex: s.reg.Spec.ClientID}); err != nil {
		return err
	}
	for i := range list.Items {
		old := &list.Items[i]
		if old.UID == s.reg.UID || !supersedes(s.reg, old) {
			continue
		}
		if err := r.Client.Delete(ctx, old); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// dropAbandoned deletes reg, not granted, when its agent has given up
// waiting for it: a request of the same identity with the same token was
// made after it (an agent waits for its latest request only). Granting it
// would cost a ServiceAccount, its token and RoleBinding, and the status
// write, all deleted again when the newer one is granted: when thousands
// of clusters register at once and the grants come slowly, agents that
// gave up on their first request had the manager grant each of them
// several times over. It tells whether reg was deleted.
func (r *Reconciler) dropAbandoned(ctx context.Context, reg *fleet.ClusterRegistration) (bool, error) {
	list := &fleet.ClusterRegistrationList{}
	if err := r.Client.List(ctx, list, client.InNamespace(reg.Namespace), client.MatchingFields{fleet.ClientIDIndex: reg.Spec.ClientID}); err != nil {
		return false, err
	}
	newer := abandonedFor(reg, list.Items)
	if newer == "" {
		return false, nil
	}
	if err := r.Client.Delete(ctx, reg, client.Preconditions{UID: &reg.UID}); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Deleted a registration its agent gave up waiting for", "registration", reg.Name, "newer", newer)
	return true, nil
}

// abandonedFor is the name of the request among others that makes reg,
// not granted, one its agent gave up: of the same identity and token, made
// a whole second or more after it ("" if none). Requests of the same
// second are left to supersedes.
func abandonedFor(reg *fleet.ClusterRegistration, others []fleet.ClusterRegistration) string {
	token := reg.Labels[fleet.RegistrationTokenLabel]
	for i := range others {
		o := &others[i]
		if o.UID != reg.UID && o.Spec.ClientID == reg.Spec.ClientID && o.Labels[fleet.RegistrationTokenLabel] == token &&
			o.DeletionTimestamp.IsZero() && reg.CreationTimestamp.Before(&o.CreationTimestamp) {
			return o.Name
		}
	}
	return ""
}

// supersedes tells whether granting reg, not granted yet, replaces old, a
// registration of the same identity: old was made before it. Creation times
// count whole seconds, and an agent that registers again at once (a new
// bootstrap placed right after its last grant) makes two in the same
// second. Of those, one granted already was granted before this one, which
// is being granted now: it is the older. One not granted yet is kept: two
// requests granted at once, on two workers, may each see the other pending,
// and then both stay (the agent that waits for either gets its credential);
// one sees the other granted only once that one's grant is written, which
// is after its own check, so they never delete each other.
func supersedes(reg, old *fleet.ClusterRegistration) bool {
	if !old.CreationTimestamp.Equal(&reg.CreationTimestamp) {
		return old.CreationTimestamp.Before(&reg.CreationTimestamp)
	}
	return old.Status.Granted
}

// markGranted ends a grant: the status write carries it; the credential is
// renewed when due (renewal.go).
func (r *Reconciler) markGranted(_ context.Context, s *scope) error {
	s.granted = true
	s.requeueAfter = r.renewAfter()
	return nil
}

// reconcileLegacyCredential removes what a grant of an earlier version
// wrote to hand the credential over (a Secret in the system registration
// namespace, and a Role and RoleBinding letting the registering token read
// it): grants seal the credential into the status now.
func (r *Reconciler) reconcileLegacyCredential(ctx context.Context, s *scope) error {
	if s.reg.Spec.PublicKey != "" {
		return nil
	}
	return r.deleteLegacyCredential(ctx, s)
}

func (r *Reconciler) deleteLegacyCredential(ctx context.Context, s *scope) error {
	meta := metav1.ObjectMeta{Name: s.secretName, Namespace: r.SystemRegistrationNamespace}
	return deleteOwned(ctx, r.Client, managed,
		&corev1.Secret{ObjectMeta: meta}, &rbacv1.RoleBinding{ObjectMeta: meta}, &rbacv1.Role{ObjectMeta: meta})
}

// reconcileDelete revokes the credential: the ServiceAccount (so its token)
// and the bindings that named it.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	if !controllerutil.ContainsFinalizer(s.reg, fleet.RegistrationFinalizer) {
		return nil
	}
	if err := r.deleteLegacyCredential(ctx, s); err != nil {
		return err
	}
	if cluster := s.reg.Status.ClusterName; cluster != "" {
		// What the grant wrote is named after the grant; registrations
		// granted by earlier versions named it after themselves. Only what
		// carries this registration's labels is deleted.
		saNames := []string{names.AgentServiceAccount(s.reg.Namespace, cluster, s.reg.Spec.ClientID, s.reg.Spec.ClientRandom), s.reg.Name}
		// The ServiceAccount first: with it go its tokens.
		objs := []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: saNames[0], Namespace: r.AgentNamespace}}}
		objs = append(objs, rotationAccess(r.AgentNamespace, saNames[0])...)
		// What earlier versions wrote: the ServiceAccount in the cluster
		// namespace, a ClusterRoleBinding for Contents, and a Role and
		// RoleBinding in the workspace namespace for the Cluster's status.
		objs = append(objs, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: StatusRoleName(cluster), Namespace: s.reg.Namespace}})
		for _, sa := range saNames {
			objs = append(objs, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: s.reg.Namespace}})
			for _, clusterNS := range []string{names.ClusterNamespace(s.reg.Namespace, cluster), names.LegacyClusterNamespace(s.reg.Namespace, cluster)} {
				objs = append(objs,
					&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: clusterNS}},
					&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: clusterNS}},
					&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: names.Limit(clusterNS+"-"+sa, names.MaxNameLength)}})
				objs = append(objs, rotationAccess(clusterNS, sa)...)
			}
		}
		if err := deleteOwned(ctx, r.Client, ownerLabels(s.reg), objs...); err != nil {
			return err
		}
	} else if err := r.revokeUnfinishedGrant(ctx, s); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(s.reg, fleet.RegistrationFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, s.reg))
}

// revokeUnfinishedGrant deletes what a grant that never ended wrote for the
// agent: the ServiceAccount, whose token was minted but never handed out,
// and its RoleBinding in the cluster namespace. A grant writes the status
// naming the Cluster last, so a grant that failed part-way, or whose status
// write did, and whose registration was deleted before the retry, is known
// only by the labels of what it wrote. They are listed past the cache, which
// may not hold a ServiceAccount made a moment ago: one list per
// registration deleted ungranted.
func (r *Reconciler) revokeUnfinishedGrant(ctx context.Context, s *scope) error {
	if r.AgentNamespace == "" {
		return nil
	}
	sas := &corev1.ServiceAccountList{}
	if err := r.APIReader.List(ctx, sas, client.InNamespace(r.AgentNamespace), client.MatchingLabels(ownerLabels(s.reg))); err != nil {
		return fmt.Errorf("listing what the unfinished grant of registration %s wrote: %w", s.reg.Name, err)
	}
	for i := range sas.Items {
		sa := &sas.Items[i]
		// The ServiceAccount first: with it goes its token.
		uid := sa.UID
		if err := r.Client.Delete(ctx, sa, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
		}
		cluster := &fleet.Cluster{}
		key := types.NamespacedName{Namespace: sa.Labels[fleet.ClusterNamespaceLabel], Name: sa.Labels[fleet.ClusterLabel]}
		if err := r.Client.Get(ctx, key, cluster); err != nil {
			// Without its Cluster, the cluster namespace goes, and the
			// binding with it.
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa.Name,
			Namespace: names.ClusterNamespaceFor(cluster.Namespace, cluster.Name, cluster.Status.Namespace)}}
		if err := deleteOwned(ctx, r.Client, ownerLabels(s.reg), binding); err != nil {
			return err
		}
	}
	return nil
}
