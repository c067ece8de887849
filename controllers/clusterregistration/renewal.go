package clusterregistration

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/ensure"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/satoken"
)

// Credential renewal. An agent's token expires (CredentialLifetime), and the
// agent may not mint tokens itself: that right, limited to its own
// ServiceAccount, would take a Role and a RoleBinding per agent. Instead the
// manager mints the next token of the agent's ServiceAccount once its newest
// is CredentialRenewAfter old (half the lifetime by default), and puts it in
// the Secret fleet.RenewedCredentialSecretName of the agent's cluster
// namespace, which the agent may get by name (its access there includes
// Secrets, get only) and no other agent may read. The agent switches to it
// when a third of its token's lifetime remains (agent/upstream). One
// Secret write per agent per CredentialRenewAfter, and none at registration.

// CheckRenewAfter refuses a renewal age that agents would outrun: an agent
// switches tokens once a third of its token's lifetime remains, so the next
// token must exist before two thirds of the lifetime have passed. 0 means the
// default, half the lifetime.
func CheckRenewAfter(lifetime, renewAfter time.Duration) error {
	switch {
	case renewAfter < 0:
		return fmt.Errorf("%s is negative: give a duration under two thirds of the credential lifetime, or 0 for half of it", renewAfter)
	case renewAfter > 0 && renewAfter >= lifetime*2/3:
		return fmt.Errorf("%s is not under two thirds of the credential lifetime %s (%s): agents look for the next token once a third of the lifetime remains, so it must exist by then",
			renewAfter, lifetime, lifetime*2/3)
	}
	return nil
}

// renewAfter is CredentialRenewAfter, or its default.
func (r *Reconciler) renewAfter() time.Duration {
	if r.CredentialRenewAfter > 0 {
		return r.CredentialRenewAfter
	}
	return r.CredentialLifetime / 2
}

// reconcileRenewal issues the next token of a granted registration's agent
// when its newest one is due, and says when to look again.
func (r *Reconciler) reconcileRenewal(ctx context.Context, s *scope) error {
	clusterName := s.reg.Status.ClusterName
	if clusterName == "" {
		return nil
	}
	cluster := &fleet.Cluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.reg.Namespace, Name: clusterName}, cluster); err != nil {
		return client.IgnoreNotFound(err) // deleted: its agents are revoked
	}
	saNamespace, saName, ok, err := r.agentServiceAccount(ctx, s.reg, cluster)
	if err != nil || !ok {
		return err // revoked: nothing to renew
	}
	key := types.NamespacedName{Name: fleet.RenewedCredentialSecretName,
		Namespace: names.ClusterNamespaceFor(cluster.Namespace, cluster.Name, cluster.Status.Namespace)}
	sa := saNamespace + "/" + saName
	newest, err := r.lastIssued(ctx, key, sa)
	if err != nil {
		return err
	}
	if granted := grantedAt(s.reg); granted.After(newest) {
		newest = granted
	}
	if wait := newest.Add(r.renewAfter()).Sub(r.Now()); wait > 0 {
		s.requeueAfter = wait
		return nil
	}
	token, err := satoken.Mint(ctx, r.Client, saNamespace, saName, r.CredentialLifetime)
	if err != nil {
		return err
	}
	if err := r.writeRenewed(ctx, key, agentLabels(s.reg, cluster), sa, token); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Issued the next agent credential", "cluster", clusterName, "serviceAccount", sa)
	s.requeueAfter = r.renewAfter()
	return nil
}

// lastIssued is when the newest token of the ServiceAccount sa
// (namespace/name) in the renewal Secret key was issued; zero when there is
// none. The Secret's metadata says it (internal/secretmeta), so a
// registration's reconcile reads no Secret: the manager's cache holds none
// of the cluster namespaces. A Secret without those annotations (written by
// an earlier version, or too new for the watch) is read uncached, and
// annotated so that it is read once.
func (r *Reconciler) lastIssued(ctx context.Context, key types.NamespacedName, sa string) (time.Time, error) {
	m, err := r.Secrets.Get(ctx, key)
	if apierrors.IsNotFound(err) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	if at, ok := issuedAt(m.Annotations, sa); ok {
		return at, nil
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, secret); err != nil {
		return time.Time{}, client.IgnoreNotFound(err)
	}
	if at, ok := issuedAt(secret.Annotations, sa); ok {
		return at, nil
	}
	c, err := satoken.Parse(string(secret.Data[fleet.CredentialTokenKey]))
	if err != nil || c.Namespace+"/"+c.ServiceAccount != sa {
		return time.Time{}, nil //nolint:nilerr // another agent's token, or none (unparsable): issue one
	}
	if ensure.Carries(secret, managed) {
		metav1.SetMetaDataAnnotation(&secret.ObjectMeta, fleet.CredentialIssuedAtAnnotation, c.IssuedAt.UTC().Format(time.RFC3339))
		metav1.SetMetaDataAnnotation(&secret.ObjectMeta, fleet.CredentialServiceAccountAnnotation, sa)
		if err := r.Client.Update(ctx, secret); err != nil {
			return time.Time{}, fmt.Errorf("annotating the renewal Secret %s: %w", key, err)
		}
	}
	return c.IssuedAt, nil
}

// issuedAt reads the annotations of a renewal Secret: when its token was
// issued, if it is one of sa.
func issuedAt(annotations map[string]string, sa string) (time.Time, bool) {
	if annotations[fleet.CredentialServiceAccountAnnotation] != sa {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339, annotations[fleet.CredentialIssuedAtAnnotation])
	return at, err == nil
}

// writeRenewed puts token, just minted for sa, into the renewal Secret key,
// which it reads uncached first: one read and one write per agent and
// CredentialRenewAfter. A Secret there that the manager did not make is
// left alone.
func (r *Reconciler) writeRenewed(ctx context.Context, key types.NamespacedName, labels map[string]string, sa, token string) error {
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, key, secret)
	switch {
	case apierrors.IsNotFound(err):
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	case err != nil:
		return err
	case !ensure.Carries(secret, managed):
		return notOwned(secret)
	}
	issued := r.Now()
	if c, err := satoken.Parse(token); err == nil {
		issued = c.IssuedAt
	}
	secret.Labels = labels
	secret.Annotations = map[string]string{
		fleet.CredentialIssuedAtAnnotation:       issued.UTC().Format(time.RFC3339),
		fleet.CredentialServiceAccountAnnotation: sa,
	}
	secret.Type = fleet.CredentialSecretType
	secret.Data = map[string][]byte{fleet.CredentialTokenKey: []byte(token)}
	if secret.ResourceVersion == "" {
		return r.Client.Create(ctx, secret)
	}
	return r.Client.Update(ctx, secret)
}

// grantedAt is when the registration was granted (its Accepted condition
// turned True), which is when its first token was minted.
func grantedAt(reg *fleet.ClusterRegistration) time.Time {
	if c := meta.FindStatusCondition(reg.Status.Conditions, fleet.ConditionAccepted); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return reg.CreationTimestamp.Time
}

// agentServiceAccount finds the ServiceAccount a registration's grant made:
// in the agents' namespace, or, granted by an earlier version, in the
// cluster namespace (named after the grant or the registration). ok is false
// when there is none of this registration (revoked).
func (r *Reconciler) agentServiceAccount(ctx context.Context, reg *fleet.ClusterRegistration, cluster *fleet.Cluster) (namespace, name string, ok bool, err error) {
	saName := names.AgentServiceAccount(reg.Namespace, cluster.Name, reg.Spec.ClientID, reg.Spec.ClientRandom)
	type place struct{ namespace, sa string }
	clusterNamespaces := []string{names.ClusterNamespace(reg.Namespace, cluster.Name), names.LegacyClusterNamespace(reg.Namespace, cluster.Name)}
	places := make([]place, 0, 1+2*len(clusterNamespaces))
	places = append(places, place{r.AgentNamespace, saName})
	for _, clusterNS := range clusterNamespaces {
		places = append(places, place{clusterNS, saName}, place{clusterNS, reg.Name})
	}
	for _, p := range places {
		sa := &corev1.ServiceAccount{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: p.sa}, sa)
		switch {
		case client.IgnoreNotFound(err) != nil:
			return "", "", false, err
		case err != nil || !ensure.Carries(sa, ownerLabels(reg)):
			continue
		}
		return p.namespace, p.sa, true, nil
	}
	return "", "", false, nil
}
