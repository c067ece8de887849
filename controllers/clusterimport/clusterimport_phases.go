package clusterimport

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/agentmanifest"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/metrics"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/registration"
	"github.com/gitfleet/fleet/internal/scheme"
)

// scope is what the phases of one reconcile share.
type scope struct {
	cluster *fleet.Cluster
	// local is set for the local Cluster, installed into the manager's own
	// cluster (see LocalCluster).
	local  bool
	before importStatus
	now    time.Time
	// checkIn is the agent's last check-in (internal/checkin.Last).
	checkIn time.Time

	// From the kubeconfig Secret.
	remote       client.Client
	apiServerURL string
	apiServerCA  []byte

	clientID    string
	deployed    Deployed
	restartedAt time.Time
	registered  bool
	// pullSecrets are the manager's image pull secrets, copied downstream.
	pullSecrets []*corev1.Secret
}

// remoteScheme knows the built-in types the installer reads downstream.
var remoteScheme = scheme.New()

// call runs one request to the downstream cluster within RemoteTimeout.
func (r *Reconciler) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.RemoteTimeout)
	defer cancel()
	return f(ctx)
}

// reconcileMoved stops importing a Cluster whose Cluster API Cluster moved
// to another management cluster (fleet.CAPIMovedAnnotation): the manager
// there installs the agent now, and healing it from here (a stale agent is
// restarted with this manager's token) would pull it back.
func (r *Reconciler) reconcileMoved(_ context.Context, s *scope) error {
	if at := s.cluster.Annotations[fleet.CAPIMovedAnnotation]; at != "" {
		return outcome.Stallf(fleet.ReasonMovedAway,
			"the Cluster API Cluster was moved to another management cluster at %s: its manager imports the cluster now, this one leaves the agent alone; delete this Cluster once the move is done", at)
	}
	return nil
}

// reconcileKubeconfig reads the kubeconfig Secret afresh and builds a client
// of the downstream cluster from it. The client is never kept: the next
// reconcile reads the Secret again, so a rotated or replaced kubeconfig is
// used at once.
//
// A Secret of another namespace is read only from the namespaces the
// manager allows (SecretNamespaces): the manager reads with its own rights,
// so otherwise whoever may write Clusters in one namespace could have the
// manager use any kubeconfig of the management cluster.
//
// The local Cluster (r.Local) is reached through the manager's own
// connection; its Secret, read all the same, only says how its agent
// reaches the manager.
func (r *Reconciler) reconcileKubeconfig(ctx context.Context, s *scope) error {
	key := secretKey(s.cluster)
	if !SecretNamespaceAllowed(s.cluster.Namespace, key.Namespace, r.SecretNamespaces) {
		return outcome.Stallf(fleet.ReasonSecretNamespaceNotAllowed,
			"spec.kubeConfigSecretNamespace %q is not the Cluster's namespace, and the manager does not allow kubeconfig Secrets from there: put the Secret into namespace %s, or have the fleet administrator add %s to the manager's --kubeconfig-secret-namespaces flag",
			key.Namespace, s.cluster.Namespace, key.Namespace)
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return outcome.Stallf(fleet.ReasonSecretNotFound, "kubeconfig Secret %s not found: create it with the kubeconfig under key %q", key, fleet.KubeConfigSecretValueKey)
		}
		return err
	}
	var cfg *rest.Config
	if r.Local.is(s.cluster, key) {
		s.local = true
		cfg = rest.CopyConfig(r.Local.Config)
	} else {
		data := secret.Data[fleet.KubeConfigSecretValueKey]
		if len(data) == 0 {
			return outcome.Stallf(fleet.ReasonKubeconfigInvalid, "kubeconfig Secret %s has no key %q: put the kubeconfig there", key, fleet.KubeConfigSecretValueKey)
		}
		parsed, err := kubeconfig.ToREST(data)
		if err != nil {
			return outcome.Stallf(fleet.ReasonKubeconfigInvalid, "kubeconfig in Secret %s: %w", key, err)
		}
		cfg = rest.CopyConfig(parsed)
	}
	cfg.Timeout = r.RemoteTimeout
	cfg.QPS, cfg.Burst = 20, 40
	cfg.UserAgent = "fleet-manager/clusterimport"
	var err error
	s.remote, err = client.New(cfg, client.Options{Scheme: remoteScheme, Mapper: agentinstall.RESTMapper()})
	if err != nil {
		return outcome.Stallf(fleet.ReasonKubeconfigInvalid, "kubeconfig in Secret %s: %w", key, err)
	}
	s.apiServerURL, s.apiServerCA = r.APIServerURL, r.APIServerCA
	if v := secret.Data[fleet.KubeConfigSecretAPIServerURLKey]; len(v) > 0 {
		s.apiServerURL = string(v)
	}
	if v := secret.Data[fleet.KubeConfigSecretAPIServerCAKey]; len(v) > 0 {
		s.apiServerCA = v
	}
	return nil
}

// reconcileIdentity gives the Cluster the downstream cluster's identity (the
// kube-system UID, unless spec.clientID is set), so that the agent's
// registration lands on this Cluster.
//
// A Cluster of this namespace registered earlier by token with the same
// identity (it has no kubeConfigSecret) is adopted, but only when the
// kubeconfig really reaches that cluster: its kube-system UID, read here, is
// the identity. A spec.clientID that merely names another cluster's identity
// adopts nothing (IdentityConflict, Stalling). Adopting takes over the
// other Cluster's labels that this one lacks, deletes its registrations
// (which revokes their credentials) and deletes it; the agent is installed
// only once it is gone, so the registration controller, which picks the
// oldest Cluster of an identity, finds exactly one. Clusters of other
// namespaces are never looked at. Two Clusters that both import the same
// downstream cluster are a conflict: the older keeps the identity, the newer
// reports IdentityConflict and installs nothing.
func (r *Reconciler) reconcileIdentity(ctx context.Context, s *scope) error {
	c := s.cluster
	s.clientID = c.Spec.ClientID
	var uid string
	if s.clientID == "" {
		var err error
		if uid, err = r.kubeSystemUID(ctx, s); err != nil {
			return err
		}
		s.clientID = uid
	}
	list := &fleet.ClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingFields{fleet.ClientIDIndex: s.clientID}); err != nil {
		return err
	}
	var adopt []*fleet.Cluster
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == c.UID || other.Namespace != c.Namespace {
			continue
		}
		if other.Spec.KubeConfigSecret != "" {
			if c.Spec.ClientID == "" || olderThan(other, c) {
				return outcome.Waitf(fleet.ReasonIdentityConflict, 0,
					"Cluster %s/%s already imports the same downstream cluster (clientID %s): delete one of them", other.Namespace, other.Name, s.clientID)
			}
			continue
		}
		adopt = append(adopt, other)
	}
	var waiting []string
	for _, other := range adopt {
		waiting = append(waiting, other.Name)
	}
	sort.Strings(waiting)
	if len(adopt) > 0 && uid == "" {
		var err error
		if uid, err = r.kubeSystemUID(ctx, s); err != nil {
			return err
		}
	}
	if !MayAdopt(s.clientID, uid, len(adopt)) {
		return outcome.Stallf(fleet.ReasonIdentityConflict,
			"spec.clientID %s is the identity of Cluster(s) %v, registered by token, but the cluster the kubeconfig reaches has kube-system UID %s: it is a different cluster, so nothing is taken over; fix spec.clientID or the kubeconfig",
			s.clientID, waiting, uid)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.ClientID = s.clientID
	for _, other := range adopt {
		for k, v := range registration.AllowedLabels(other.Labels) {
			if _, ok := c.Labels[k]; !ok {
				if c.Labels == nil {
					c.Labels = map[string]string{}
				}
				c.Labels[k] = v
			}
		}
	}
	if data, err := patch.Data(c); err != nil || string(data) != "{}" {
		if err := r.Client.Patch(ctx, c, patch); err != nil {
			return fmt.Errorf("setting spec.clientID of cluster %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	if len(adopt) == 0 {
		return nil
	}
	for _, other := range adopt {
		if !other.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.revokeRegistrations(ctx, c.Namespace, s.clientID); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("Adopting the identity of a Cluster registered by token; deleting it", "other", klog.KObj(other), "clientID", s.clientID)
		if err := r.Client.Delete(ctx, other, client.Preconditions{UID: &other.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting cluster %s/%s, registered by token with the same identity: %w", other.Namespace, other.Name, err)
		}
	}
	return outcome.Waitf(fleet.ReasonAdopting, 0, "taking over the identity (clientID %s) of Cluster(s) %v registered by token: waiting for them to be deleted", s.clientID, waiting)
}

// kubeSystemUID reads the downstream cluster's identity: the UID of its
// kube-system namespace, through the kubeconfig.
func (r *Reconciler) kubeSystemUID(ctx context.Context, s *scope) (string, error) {
	ns := &corev1.Namespace{}
	if err := r.call(ctx, func(ctx context.Context) error {
		return s.remote.Get(ctx, types.NamespacedName{Name: "kube-system"}, ns)
	}); err != nil {
		return "", remoteFailure("reading the kube-system namespace for the cluster identity", err)
	}
	return string(ns.UID), nil
}

func olderThan(a, b *fleet.Cluster) bool {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.Name < b.Name
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
}

// revokeRegistrations deletes the registrations of an identity; the
// registration controller's finalizer revokes their credentials.
func (r *Reconciler) revokeRegistrations(ctx context.Context, namespace, clientID string) error {
	regs := &fleet.ClusterRegistrationList{}
	if err := r.Client.List(ctx, regs, client.InNamespace(namespace), client.MatchingFields{fleet.ClientIDIndex: clientID}); err != nil {
		return err
	}
	for i := range regs.Items {
		if err := r.Client.Delete(ctx, &regs.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("revoking registration %s/%s: %w", regs.Items[i].Namespace, regs.Items[i].Name, err)
		}
	}
	return nil
}

func (r *Reconciler) agentNamespace(c *fleet.Cluster) string {
	if c.Spec.AgentNamespace != "" {
		return c.Spec.AgentNamespace
	}
	return fleet.DefaultSystemNamespace
}

// reconcileDeployed reads the agent Deployment downstream: whether it is
// there, and the record of its last install.
func (r *Reconciler) reconcileDeployed(ctx context.Context, s *scope) error {
	dep := &appsv1.Deployment{}
	key := types.NamespacedName{Namespace: r.agentNamespace(s.cluster), Name: fleet.AgentName}
	err := r.call(ctx, func(ctx context.Context) error { return s.remote.Get(ctx, key, dep) })
	switch {
	case apierrors.IsNotFound(err):
		s.deployed = Deployed{}
		return nil
	case err != nil:
		return remoteFailure("reading the agent Deployment "+key.String(), err)
	}
	s.deployed = Deployed{Exists: true, SettingsHash: dep.Annotations[SettingsHashAnnotation]}
	if t, err := time.Parse(time.RFC3339, dep.Spec.Template.Annotations[RestartedAtAnnotation]); err == nil {
		s.deployed.RestartedAt = t
	}
	return nil
}

// agentOptions are the install options the Cluster's spec asks for, without
// the registration token.
func (r *Reconciler) agentOptions(s *scope, image string) agentinstall.Options {
	c := s.cluster
	o := agentinstall.ClusterOptions(&c.Spec)
	o.Namespace, o.Image, o.ImagePullPolicy = r.agentNamespace(c), image, r.AgentImagePullPolicy
	o.Config = &agentinstall.AgentConfig{
		Labels:          registration.AllowedLabels(c.Labels),
		ClientID:        s.clientID,
		CheckinInterval: r.AgentCheckinInterval.String(),
	}
	// Written only when not the default, so that an agent of an earlier
	// version, which refuses keys it does not know, reads the ConfigMap of
	// a default install.
	if r.AgentTLSMode == agentmanifest.TLSModeSystemStore {
		o.Config.AgentTLSMode = r.AgentTLSMode
	}
	if r.AgentGarbageCollectionInterval > 0 {
		o.Config.GarbageCollectionInterval = r.AgentGarbageCollectionInterval.String()
	}
	var copied bool
	o.ImagePullSecrets, copied = agentmanifest.PullSecrets(&c.Spec, r.AgentImagePullSecrets)
	if copied && o.Namespace != r.SystemNamespace {
		// The Secrets are there already in the manager's own namespace.
		o.PullSecrets = s.pullSecrets
	}
	return o
}

// readPullSecrets reads the manager's image pull secrets, which each
// install copies into the agent's namespace.
func (r *Reconciler) readPullSecrets(ctx context.Context, s *scope) error {
	s.pullSecrets = nil
	if r.agentNamespace(s.cluster) == r.SystemNamespace || s.cluster.Spec.AgentPullSecrets != nil {
		// In the manager's own namespace already; or the Cluster names
		// Secrets of its own, which are not copied.
		return nil
	}
	for _, name := range r.AgentImagePullSecrets {
		secret := &corev1.Secret{}
		key := types.NamespacedName{Namespace: r.SystemNamespace, Name: name}
		if err := r.APIReader.Get(ctx, key, secret); err != nil {
			if apierrors.IsNotFound(err) {
				return outcome.Wait(fleet.ReasonInstallFailed, time.Minute,
					fmt.Errorf("the agent's image pull secret %s (--agent-image-pull-secrets) does not exist", key))
			}
			return fmt.Errorf("reading the agent's image pull secret %s: %w", key, err)
		}
		s.pullSecrets = append(s.pullSecrets, secret)
	}
	return nil
}

// agentImage is the image to install: with agent Bundles, the one the
// Cluster's agent Bundle has given it so far (the rollout moves clusters to
// a new image in batches, and a repair must not jump the queue), else the
// manager's.
func (r *Reconciler) agentImage(ctx context.Context, c *fleet.Cluster) (string, error) {
	if !r.AgentBundles {
		return r.AgentImage, nil
	}
	b := &fleet.Bundle{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: names.AgentBundle(c.Name)}, b)
	switch {
	case apierrors.IsNotFound(err):
		return r.AgentImage, nil
	case err != nil:
		return "", err
	}
	if image := b.Annotations[fleet.AgentImageAnnotation]; b.Labels[fleet.AgentBundleLabel] == "true" && image != "" {
		return image, nil
	}
	return r.AgentImage, nil
}

// reconcileInstall (re)installs the agent when Decide says so, at most
// MaxConcurrentInstalls at a time.
func (r *Reconciler) reconcileInstall(ctx context.Context, s *scope) error {
	c := s.cluster
	image, err := r.agentImage(ctx, c)
	if err != nil {
		return err
	}
	if err := r.readPullSecrets(ctx, s); err != nil {
		return err
	}
	opts := r.agentOptions(s, image)
	want := Wanted{SettingsHash: SettingsHash(opts), Generation: c.Spec.RedeployAgentGeneration,
		APIServerURL: s.apiServerURL, APIServerCAHash: CAHash(s.apiServerCA)}
	status := c.Status
	status.Agent.LastSeen = metav1.NewTime(s.checkIn)
	d := Decide(s.deployed, want, status, s.now, r.StaleAfter)
	if d.Reason == InstallAgentStale {
		// A restart of an agent that checks in, on the word of a cache
		// that lags behind its Lease, would cut off a working agent: the
		// Lease is read again first.
		if live := checkin.Confirm(ctx, r.APIReader, c, s.checkIn); live.After(s.checkIn) {
			s.checkIn = live
			status.Agent.LastSeen = metav1.NewTime(live)
			d = Decide(s.deployed, want, status, s.now, r.StaleAfter)
		}
	}
	s.restartedAt = s.deployed.RestartedAt
	if d.Reason == InstallSettingsChanged && r.AgentBundles && !c.Status.Agent.LastSeen.IsZero() {
		// The agent Bundle brings the settings; the agent deploys it.
		d = Decision{}
	}
	if d.Reason == "" {
		s.registered = AgentRegistered(s.checkIn, s.restartedAt, s.now, r.StaleAfter)
		return nil
	}

	select {
	case r.installs <- struct{}{}:
		defer func() { <-r.installs }()
	case <-ctx.Done():
		return ctx.Err()
	}
	if d.Restart {
		boot, err := r.ensureToken(ctx, s)
		if err != nil {
			return err
		}
		opts.Bootstrap = boot
		s.restartedAt = r.Now().UTC().Truncate(time.Second)
	}
	objs, err := agentinstall.Objects(opts)
	if err != nil {
		return outcome.Stallf(fleet.ReasonInstallFailed, "rendering the agent for cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	if s.local {
		objs = withoutInstalled(objs)
	}
	for _, o := range objs {
		if dep, ok := o.(*appsv1.Deployment); ok {
			metav1.SetMetaDataAnnotation(&dep.ObjectMeta, SettingsHashAnnotation, want.SettingsHash)
			if !s.restartedAt.IsZero() {
				metav1.SetMetaDataAnnotation(&dep.Spec.Template.ObjectMeta, RestartedAtAnnotation, s.restartedAt.Format(time.RFC3339))
			}
		}
	}
	// Each request is bounded by the client's timeout; the whole apply by
	// one RemoteTimeout per object.
	applyCtx, cancel := context.WithTimeout(ctx, time.Duration(len(objs))*r.RemoteTimeout)
	defer cancel()
	if err := agentinstall.Apply(applyCtx, s.remote, objs); err != nil {
		metrics.Imports.WithLabelValues(metrics.ResultFailed).Inc()
		return remoteFailure("installing the agent", err)
	}
	// What spec.agentSchedulingCustomization no longer asks for goes.
	if err := agentinstall.RemoveScheduling(applyCtx, s.remote, opts.Namespace, localScheduling(s.local, opts.Scheduling)); err != nil {
		metrics.Imports.WithLabelValues(metrics.ResultFailed).Inc()
		return remoteFailure("removing the agent's scheduling objects", err)
	}
	metrics.Imports.WithLabelValues(metrics.ResultInstalled).Inc()
	ctrl.LoggerFrom(ctx).Info("Installed the agent", "why", d.Reason, "restarted", d.Restart, "agentNamespace", opts.Namespace)
	c.Status.AgentDeployedGeneration = &c.Spec.RedeployAgentGeneration
	c.Status.APIServerURL = want.APIServerURL
	c.Status.APIServerCAHash = want.APIServerCAHash
	c.Status.AgentTLSMode = agentmanifest.TLSModeStrict
	if r.AgentTLSMode != "" {
		c.Status.AgentTLSMode = r.AgentTLSMode
	}
	c.Status.GarbageCollectionInterval = nil
	if r.AgentGarbageCollectionInterval > 0 {
		c.Status.GarbageCollectionInterval = &metav1.Duration{Duration: r.AgentGarbageCollectionInterval}
	}
	s.registered = AgentRegistered(s.checkIn, s.restartedAt, s.now, r.StaleAfter)
	return nil
}

// withoutInstalled leaves out of the local agent's objects those `fleet
// install controller` made with the manager (its namespace, ServiceAccount
// and cluster-admin binding): the manager may write the rest in its own
// namespace only, and may not bind cluster-admin.
func withoutInstalled(objs []client.Object) []client.Object {
	out := objs[:0:0]
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Namespace, *corev1.ServiceAccount, *rbacv1.ClusterRoleBinding:
			continue
		case *schedulingv1.PriorityClass:
			// Cluster-scoped, and a priority over every pod of the
			// cluster: the manager may not make one.
			continue
		case *appsv1.Deployment:
			o.Spec.Template.Spec.PriorityClassName = ""
		}
		out = append(out, o)
	}
	return out
}

// ensureToken returns the values of the Cluster's import token, minting the
// token when it is missing and replacing it when less than half its TTL is
// left.
func (r *Reconciler) ensureToken(ctx context.Context, s *scope) (*agentinstall.Bootstrap, error) {
	c := s.cluster
	token := &fleet.ClusterRegistrationToken{}
	key := types.NamespacedName{Namespace: c.Namespace, Name: names.ImportToken(c.Name)}
	err := r.Client.Get(ctx, key, token)
	switch {
	case err == nil && !token.DeletionTimestamp.IsZero():
		return nil, outcome.Waitf(fleet.ReasonWaitingForToken, 0, "waiting for the old import token %s to be removed", key)
	case err == nil:
		if exp := registration.TokenExpiry(token); exp != nil && exp.Sub(s.now) < r.TokenTTL/2 {
			if err := r.Client.Delete(ctx, token, client.Preconditions{UID: &token.UID}); err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
			return nil, outcome.Waitf(fleet.ReasonWaitingForToken, 0, "replacing the import token %s, which expires at %s", key, exp.UTC().Format(time.RFC3339))
		}
	case apierrors.IsNotFound(err):
		token = &fleet.ClusterRegistrationToken{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{
				fleet.ManagedLabel: "true", fleet.ClusterLabel: c.Name,
			}},
			Spec: fleet.ClusterRegistrationTokenSpec{TTL: &metav1.Duration{Duration: r.TokenTTL}},
		}
		if err := controllerutil.SetControllerReference(c, token, r.Client.Scheme()); err != nil {
			return nil, err
		}
		if err := r.Client.Create(ctx, token); err != nil {
			return nil, fmt.Errorf("creating import token %s: %w", key, err)
		}
	default:
		return nil, err
	}
	// Uncached: the token's values Secret is in the Cluster's namespace,
	// whose Secrets the manager's cache does not hold.
	boot, err := agentinstall.WaitForToken(ctx, r.APIReader, token, r.RemoteTimeout)
	if err != nil {
		return nil, outcome.Wait(fleet.ReasonWaitingForToken, 0, err)
	}
	boot.APIServerURL, boot.APIServerCA = s.apiServerURL, string(s.apiServerCA)
	return boot, nil
}

// reconcileToken deletes the import token once the agent has registered:
// the agent holds its own credential then, and a live token is only a risk.
func (r *Reconciler) reconcileToken(ctx context.Context, s *scope) error {
	if !s.registered {
		return nil
	}
	token := &fleet.ClusterRegistrationToken{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.cluster.Namespace, Name: names.ImportToken(s.cluster.Name)}, token)
	if apierrors.IsNotFound(err) || err == nil && !token.DeletionTimestamp.IsZero() {
		return nil
	}
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(r.Client.Delete(ctx, token, client.Preconditions{UID: &token.UID}))
}

// localScheduling is the scheduling objects the local agent keeps: its
// PriorityClass is not the manager's to make or delete.
// The manager may not even read PriorityClasses (cluster-scoped), so the
// local agent's is kept whether or not the Cluster asks for one.
func localScheduling(local bool, sc *fleet.AgentSchedulingCustomization) *fleet.AgentSchedulingCustomization {
	if !local {
		return sc
	}
	keep := fleet.AgentSchedulingCustomization{}
	if sc != nil {
		keep = *sc
	}
	keep.PriorityClass = &fleet.PriorityClassSpec{}
	return &keep
}
