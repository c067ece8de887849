package clusterregistration

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/cacheindex"
	"github.com/gitfleet/fleet/internal/ensure"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/satoken"
)

// Names of the shared RBAC objects.
const (
	// AgentRole is the ClusterRole that agents are bound to, each in its own
	// cluster namespace only (by a RoleBinding there).
	AgentRole = "fleet-agent"
	// ContentReaderRole is the ClusterRole that lets agents get Contents.
	ContentReaderRole = "fleet-content-reader"
)

// Reconciler grants ClusterRegistrations.
type Reconciler struct {
	Client client.Client
	// APIReader reads around the cache: a credential secret missing from
	// the cache may only be too new to be there yet.
	APIReader client.Reader
	// SystemRegistrationNamespace holds credential secrets.
	SystemRegistrationNamespace string
	// CredentialLifetime is how long an agent credential is valid.
	CredentialLifetime time.Duration
	// CredentialSecretTTL is how long a credential secret stays after the grant.
	CredentialSecretTTL time.Duration
	Workers             int
	// MaxPending bounds the grants whose agent has not picked up its
	// credential yet (DefaultMaxPending when 0). Each such grant's
	// RoleBinding names the registering token, and the API server weighs
	// every one of them on each of the token's requests, which thousands of
	// waiting agents make: unbounded, registering N agents at once cost the
	// API server N² role checks. Past the bound, registrations wait.
	MaxPending int
	Now        func() time.Time

	pending     pendingCount
	roleBinding toolscache.Indexer
}

// DefaultMaxPending is the default of Reconciler.MaxPending.
const DefaultMaxPending = 500

// pendingRetry is how soon a registration held back by MaxPending is looked
// at again.
const pendingRetry = 2 * time.Second

// pendingCount counts the token read bindings in the system registration
// namespace: one per grant not picked up yet. It recounts from the cache at
// most every pendingRecount, and counts the grants it lets through meanwhile,
// so that concurrent workers do not all pass on one stale count.
type pendingCount struct {
	mu sync.Mutex
	at time.Time
	n  int
}

const pendingRecount = 250 * time.Millisecond

// admit tells whether one more grant may start now.
func (r *Reconciler) admit(now time.Time) (bool, error) {
	p := &r.pending
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.at) > pendingRecount {
		bindings, err := cacheindex.Objects[rbacv1.RoleBinding](r.roleBinding, toolscache.NamespaceIndex, r.SystemRegistrationNamespace)
		if err != nil {
			return false, err
		}
		p.n, p.at = 0, now
		for _, b := range bindings {
			if b.Labels[registrationLabel] != "" {
				p.n++
			}
		}
	}
	if p.n >= r.MaxPending {
		return false, nil
	}
	p.n++
	return true, nil
}

// SetupWithManager registers the controller and its indexes.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.CredentialLifetime == 0 {
		r.CredentialLifetime = 365 * 24 * time.Hour
	}
	if r.CredentialSecretTTL == 0 {
		r.CredentialSecretTTL = 10 * time.Minute
	}
	if r.MaxPending <= 0 {
		r.MaxPending = DefaultMaxPending
	}
	if err := IndexClientID(ctx, mgr); err != nil {
		return err
	}
	var err error
	if r.roleBinding, err = cacheindex.For(ctx, mgr.GetCache(), &rbacv1.RoleBinding{}, nil); err != nil {
		return err
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	// An agent deletes its credential secret once it has stored the
	// credential: the token's right to read it goes at once, rather than when
	// the secret would have expired. This has a queue of its own, so as not to
	// wait behind thousands of grants: until it is done, the binding weighs
	// on every request of the token.
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("credentialpickup").
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{},
			credentialSecretDeleted(r.SystemRegistrationNamespace))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 32}).
		Complete(reconcile.Func(r.withdrawPickedUp)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleet.ClusterRegistration{}).
		Named("clusterregistration").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// SharedRoles are the ClusterRoles every agent is bound to. They are the
// same for all agents, so they are made once at start rather than by each
// grant:
//   - fleet-agent: what an agent may do in its cluster namespace. Bound by a
//     RoleBinding in that namespace, it grants nothing anywhere else;
//   - fleet-content-reader: get Contents (by name; no list or watch).
func SharedRoles() []*rbacv1.ClusterRole {
	labels := map[string]string{fleet.ManagedLabel: "true"}
	return []*rbacv1.ClusterRole{{
		ObjectMeta: metav1.ObjectMeta{Name: AgentRole, Labels: labels},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{fleet.GroupVersion.Group}, Resources: []string{"bundledeployments"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{fleet.GroupVersion.Group}, Resources: []string{"bundledeployments/status"}, Verbs: []string{"update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get"}},
		},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: ContentReaderRole, Labels: labels},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{fleet.GroupVersion.Group}, Resources: []string{"contents"}, Verbs: []string{"get"}}},
	}}
}

// EnsureSharedRoles creates or corrects the shared ClusterRoles. Replicas
// starting together race to create them: the loser reads them again and
// corrects them.
func EnsureSharedRoles(ctx context.Context, c client.Client) error {
	raced := func(err error) bool { return apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) }
	for _, role := range SharedRoles() {
		if err := retry.OnError(retry.DefaultRetry, raced, func() error {
			return ensureObject(ctx, c, map[string]string{fleet.ManagedLabel: "true"}, role)
		}); err != nil {
			return err
		}
	}
	return nil
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
	cluster    *fleet.Cluster
	clusterNS  string
	saName     string
	secretName string
}

// Reconcile grants a registration once, then expires its credential secret.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	reg := &fleet.ClusterRegistration{}
	if err := r.Client.Get(ctx, req.NamespacedName, reg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &scope{reg: reg, saName: reg.Name, secretName: names.CredentialSecret(reg.Spec.ClientID, reg.Spec.ClientRandom)}
	if !reg.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, s)
	}
	if reg.Status.Granted {
		return r.expireSecret(ctx, s)
	}
	if err := Validate(reg); err != nil {
		return ctrl.Result{}, refuse(ctx, reg, err)
	}
	// The token is checked before anything is made for the request: a
	// registration naming no token must leave no Cluster, namespace or RBAC.
	tokenName := reg.Labels[fleet.RegistrationTokenLabel]
	s.token = &fleet.ClusterRegistrationToken{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: reg.Namespace, Name: tokenName}, s.token); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, refuse(ctx, reg, fmt.Errorf("registration token %s/%s does not exist (expired or deleted)", reg.Namespace, tokenName))
		}
		return ctrl.Result{}, err
	}
	if controllerutil.AddFinalizer(reg, fleet.RegistrationFinalizer) {
		if err := r.Client.Update(ctx, reg); err != nil {
			return ctrl.Result{}, err
		}
	}
	if ok, err := r.admit(r.Now()); !ok || err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Registration waits: too many credentials are not picked up yet", "max", r.MaxPending)
		return ctrl.Result{RequeueAfter: pendingRetry}, err
	}
	phases := []func(context.Context, *scope) error{
		r.reconcileCluster,
		r.reconcileAgentAccess,
		r.reconcileCredential,
		r.replaceOlder,
	}
	for _, phase := range phases {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	patch := client.MergeFrom(reg.DeepCopy())
	reg.Status.Granted = true
	reg.Status.ClusterName = s.cluster.Name
	if err := r.Client.Status().Patch(ctx, reg, patch); err != nil {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Granted cluster registration", "registration", klog.KObj(reg), "cluster", klog.KObj(s.cluster))
	return ctrl.Result{RequeueAfter: r.CredentialSecretTTL}, nil
}

// refuse ends the reconcile of a registration that is not granted. The agent
// cannot fix a request after the fact; it will see no credential and log
// that registration is pending.
func refuse(ctx context.Context, reg *fleet.ClusterRegistration, why error) error {
	ctrl.LoggerFrom(ctx).Info("Refusing cluster registration", "registration", klog.KObj(reg), "reason", why.Error())
	return reconcile.TerminalError(why)
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
	if reg.Labels[fleet.RegistrationTokenLabel] == "" {
		errs = append(errs, fmt.Errorf("label %s naming the registration token is missing", fleet.RegistrationTokenLabel))
	}
	return errors.Join(errs...)
}

// AllowedLabels drops the labels an agent may not give its Cluster: fleet's
// own, and any that are not valid label keys or values.
func AllowedLabels(requested map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range requested {
		if strings.Contains(k, "fleet.cattle.io/") || strings.Contains(k, "cluster.x-k8s.io/") {
			continue
		}
		if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			continue
		}
		out[k] = v
	}
	return out
}

// reconcileCluster finds the Cluster of this identity, or creates it.
func (r *Reconciler) reconcileCluster(ctx context.Context, s *scope) error {
	list := &fleet.ClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.reg.Namespace), client.MatchingFields{fleet.ClientIDIndex: s.reg.Spec.ClientID}); err != nil {
		return err
	}
	if len(list.Items) > 0 {
		sort.Slice(list.Items, func(i, j int) bool {
			return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp)
		})
		s.cluster = &list.Items[0]
		return nil
	}
	cluster := &fleet.Cluster{}
	name := names.ClusterForClientID(s.reg.Spec.ClientID)
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.reg.Namespace, Name: name}, cluster)
	switch {
	case err == nil && cluster.Spec.ClientID != "" && cluster.Spec.ClientID != s.reg.Spec.ClientID:
		return reconcile.TerminalError(fmt.Errorf("cluster %s already belongs to another identity", name))
	case err == nil:
		// A Cluster made ahead of time under this name: claim it.
		patch := client.MergeFrom(cluster.DeepCopy())
		cluster.Spec.ClientID = s.reg.Spec.ClientID
		if err := r.Client.Patch(ctx, cluster, patch); err != nil {
			return err
		}
	case apierrors.IsNotFound(err):
		// Made with the cluster controller's finalizer, which it would
		// otherwise add straight away: one write fewer per cluster.
		cluster = &fleet.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.reg.Namespace, Labels: AllowedLabels(s.reg.Spec.ClusterLabels),
				Finalizers: []string{fleet.ClusterFinalizer}},
			Spec: fleet.ClusterSpec{ClientID: s.reg.Spec.ClientID},
		}
		if err := r.Client.Create(ctx, cluster); err != nil {
			return err
		}
	default:
		return err
	}
	s.cluster = cluster
	return nil
}

func managedLabels(reg *fleet.ClusterRegistration) map[string]string {
	return map[string]string{fleet.ManagedLabel: "true", registrationLabel: reg.Name, registrationNamespaceLabel: reg.Namespace}
}

// StatusRoleName is the Role letting an agent patch its own Cluster's status.
func StatusRoleName(cluster string) string {
	return names.Limit("fleet-agent-"+cluster+"-status", names.MaxNameLength)
}

// reconcileAgentAccess creates the cluster namespace, the agent's
// ServiceAccount and exactly its RBAC, and lets the registering token read
// the credential secret to come, and delete it once read (that one secret,
// nothing else: every pending grant's binding names the token, so the API
// server weighs them all on each of the token's requests, and a picked-up
// credential should not linger). A grant is a chain of round trips,
// and thousands may be waiting: what does not need the namespace is written
// while it is made, and each step writes its objects at once.
func (r *Reconciler) reconcileAgentAccess(ctx context.Context, s *scope) error {
	s.clusterNS = names.ClusterNamespace(s.cluster.Namespace, s.cluster.Name)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: s.saName, Namespace: s.clusterNS}}
	labels := managedLabels(s.reg)
	elsewhere := []client.Object{
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: names.Limit(s.clusterNS+"-"+s.saName, names.MaxNameLength)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ContentReaderRole},
			Subjects:   subject,
		},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: StatusRoleName(s.cluster.Name), Namespace: s.cluster.Namespace},
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{fleet.GroupVersion.Group}, Resources: []string{"clusters/status"},
				Verbs: []string{"patch"}, ResourceNames: []string{s.cluster.Name},
			}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: s.reg.Name, Namespace: s.cluster.Namespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: StatusRoleName(s.cluster.Name)},
			Subjects:   subject,
		},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: s.secretName, Namespace: r.SystemRegistrationNamespace},
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "delete"}, ResourceNames: []string{s.secretName},
			}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: s.secretName, Namespace: r.SystemRegistrationNamespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: s.secretName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: s.token.Name, Namespace: s.token.Namespace}},
		},
	}
	if err := concurrently(
		func() error {
			return ensure.Namespace(ctx, r.Client, s.clusterNS, map[string]string{
				fleet.ManagedLabel: "true", fleet.ClusterLabel: s.cluster.Name, fleet.ClusterNamespaceLabel: s.cluster.Namespace,
			})
		},
		func() error { return ensureAll(ctx, r.Client, labels, elsewhere) },
	); err != nil {
		return err
	}
	return ensureAll(ctx, r.Client, labels, []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: s.saName, Namespace: s.clusterNS}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: s.saName, Namespace: s.clusterNS},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: AgentRole},
			Subjects:   subject,
		},
	})
}

// reconcileCredential mints the agent's token and writes the credential
// secret, which only the registering token may read.
func (r *Reconciler) reconcileCredential(ctx context.Context, s *scope) error {
	bearer, err := satoken.Mint(ctx, r.Client, s.clusterNS, s.saName, r.CredentialLifetime)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.secretName, Namespace: r.SystemRegistrationNamespace}}
	_, err = controllerutil.CreateOrUpdate(ctx, r.Client, secret, func() error {
		secret.Labels = managedLabels(s.reg)
		secret.Type = fleet.CredentialSecretType
		secret.Data = map[string][]byte{
			fleet.CredentialTokenKey:            []byte(bearer),
			fleet.CredentialClusterNameKey:      []byte(s.cluster.Name),
			fleet.CredentialClusterNamespaceKey: []byte(s.clusterNS),
			fleet.CredentialNamespaceKey:        []byte(s.cluster.Namespace),
		}
		return nil
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
		older := old.CreationTimestamp.Before(&s.reg.CreationTimestamp) ||
			old.CreationTimestamp.Equal(&s.reg.CreationTimestamp) && old.Name < s.reg.Name
		if old.UID == s.reg.UID || !older {
			continue
		}
		if err := r.Client.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// Labels naming the registration a credential secret (and its RBAC) is for.
const (
	registrationLabel          = "fleet.cattle.io/registration"
	registrationNamespaceLabel = "fleet.cattle.io/registration-namespace"
)

// credentialSecretDeleted passes only the deletion of credential secrets.
func credentialSecretDeleted(namespace string) predicate.TypedPredicate[*corev1.Secret] {
	return predicate.TypedFuncs[*corev1.Secret]{
		CreateFunc:  func(event.TypedCreateEvent[*corev1.Secret]) bool { return false },
		UpdateFunc:  func(event.TypedUpdateEvent[*corev1.Secret]) bool { return false },
		GenericFunc: func(event.TypedGenericEvent[*corev1.Secret]) bool { return false },
		DeleteFunc: func(e event.TypedDeleteEvent[*corev1.Secret]) bool {
			return e.Object.Namespace == namespace && e.Object.Type == fleet.CredentialSecretType
		},
	}
}

// withdrawPickedUp takes back a token's right to read a credential secret
// once the secret is gone. The cache saw the deletion, so it is asked whether
// the secret came back.
func (r *Reconciler) withdrawPickedUp(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if err := r.Client.Get(ctx, req.NamespacedName, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err // still there (nil): the expiry takes care of it
	}
	return reconcile.Result{}, r.withdrawRead(ctx, req.Name)
}

// withdrawRead deletes the RoleBinding and Role, named after a credential
// secret, that let the registering token read it.
func (r *Reconciler) withdrawRead(ctx context.Context, secretName string) error {
	meta := metav1.ObjectMeta{Name: secretName, Namespace: r.SystemRegistrationNamespace}
	return deleteAll(ctx, r.Client, &rbacv1.RoleBinding{ObjectMeta: meta}, &rbacv1.Role{ObjectMeta: meta})
}

// expireSecret removes the credential secret and the token's right to read
// it: at once when the agent has deleted the secret (it has the
// credential), otherwise once the agent has had time to fetch it.
func (r *Reconciler) expireSecret(ctx context.Context, s *scope) (ctrl.Result, error) {
	key := types.NamespacedName{Namespace: r.SystemRegistrationNamespace, Name: s.secretName}
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		// Fetched and deleted by the agent, or too new for the cache.
		err = r.APIReader.Get(ctx, key, secret)
	}
	if apierrors.IsNotFound(err) {
		// Normally already done by withdrawPickedUp; not if the deletion
		// came while the manager was down.
		return ctrl.Result{}, r.withdrawRead(ctx, s.secretName)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if left := secret.CreationTimestamp.Add(r.CredentialSecretTTL).Sub(r.Now()); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	return ctrl.Result{}, r.deleteCredentialSecret(ctx, s)
}

func (r *Reconciler) deleteCredentialSecret(ctx context.Context, s *scope) error {
	if err := deleteAll(ctx, r.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.secretName, Namespace: r.SystemRegistrationNamespace}}); err != nil {
		return err
	}
	return r.withdrawRead(ctx, s.secretName)
}

// reconcileDelete revokes the credential: the ServiceAccount (so its token)
// and the bindings that named it.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	if !controllerutil.ContainsFinalizer(s.reg, fleet.RegistrationFinalizer) {
		return nil
	}
	if err := r.deleteCredentialSecret(ctx, s); err != nil {
		return err
	}
	if s.reg.Status.ClusterName != "" {
		clusterNS := names.ClusterNamespace(s.reg.Namespace, s.reg.Status.ClusterName)
		if err := deleteAll(ctx, r.Client,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: s.saName, Namespace: clusterNS}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: s.saName, Namespace: clusterNS}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: names.Limit(clusterNS+"-"+s.saName, names.MaxNameLength)}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: s.reg.Name, Namespace: s.reg.Namespace}},
		); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(s.reg, fleet.RegistrationFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, s.reg))
}

// replaceBindingOfOtherRole deletes a binding that exists with another
// roleRef than wanted (one made by an earlier version, bound to a Role
// since replaced by a shared ClusterRole): roleRef cannot be changed, so the
// binding is made again.
func replaceBindingOfOtherRole(ctx context.Context, c client.Client, want client.Object) error {
	var ref rbacv1.RoleRef
	var have client.Object
	switch w := want.(type) {
	case *rbacv1.RoleBinding:
		ref, have = w.RoleRef, &rbacv1.RoleBinding{}
	case *rbacv1.ClusterRoleBinding:
		ref, have = w.RoleRef, &rbacv1.ClusterRoleBinding{}
	default:
		return nil
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
		return client.IgnoreNotFound(err)
	}
	var got rbacv1.RoleRef
	switch h := have.(type) {
	case *rbacv1.RoleBinding:
		got = h.RoleRef
	case *rbacv1.ClusterRoleBinding:
		got = h.RoleRef
	}
	if got == ref {
		return nil
	}
	uid := have.GetUID()
	if err := c.Delete(ctx, have, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("replacing %T %s/%s bound to %s %s: %w", want, want.GetNamespace(), want.GetName(), got.Kind, got.Name, err)
	}
	return nil
}

func deleteAll(ctx context.Context, c client.Client, objs ...client.Object) error {
	for _, obj := range objs {
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// concurrently runs independent steps at once and joins their errors.
func concurrently(steps ...func() error) error {
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, step := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = step()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ensureAll creates each object or brings its rules, role ref and subjects in
// line with the given ones. The objects are independent, so they are written
// concurrently.
func ensureAll(ctx context.Context, c client.Client, labels map[string]string, objs []client.Object) error {
	steps := make([]func() error, len(objs))
	for i, want := range objs {
		steps[i] = func() error { return ensureObject(ctx, c, labels, want) }
	}
	return concurrently(steps...)
}

func ensureObject(ctx context.Context, c client.Client, labels map[string]string, want client.Object) error {
	if err := replaceBindingOfOtherRole(ctx, c, want); err != nil {
		return err
	}
	obj := want.DeepCopyObject().(client.Object)
	_, err := controllerutil.CreateOrPatch(ctx, c, obj, func() error {
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		obj.SetLabels(l)
		switch o := obj.(type) {
		case *rbacv1.Role:
			o.Rules = want.(*rbacv1.Role).Rules
		case *rbacv1.ClusterRole:
			o.Rules = want.(*rbacv1.ClusterRole).Rules
		case *rbacv1.RoleBinding:
			o.RoleRef, o.Subjects = want.(*rbacv1.RoleBinding).RoleRef, want.(*rbacv1.RoleBinding).Subjects
		case *rbacv1.ClusterRoleBinding:
			o.RoleRef, o.Subjects = want.(*rbacv1.ClusterRoleBinding).RoleRef, want.(*rbacv1.ClusterRoleBinding).Subjects
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ensuring %T %s/%s: %w", want, want.GetNamespace(), want.GetName(), err)
	}
	return nil
}
