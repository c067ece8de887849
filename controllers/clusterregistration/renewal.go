package clusterregistration

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

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
// when a third of its token's lifetime remains (agent/registration). One
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
	clusterNS := names.ClusterNamespaceFor(cluster.Namespace, cluster.Name, cluster.Status.Namespace)
	secret := &corev1.Secret{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: clusterNS, Name: fleet.RenewedCredentialSecretName}, secret)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	newest := grantedAt(s.reg)
	if c, perr := satoken.Parse(string(secret.Data[fleet.CredentialTokenKey])); err == nil && perr == nil &&
		c.Namespace == saNamespace && c.ServiceAccount == saName && c.IssuedAt.After(newest) {
		newest = c.IssuedAt
	}
	if wait := newest.Add(r.renewAfter()).Sub(r.Now()); wait > 0 {
		s.requeueAfter = wait
		return nil
	}
	token, err := satoken.Mint(ctx, r.Client, saNamespace, saName, r.CredentialLifetime)
	if err != nil {
		return err
	}
	secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fleet.RenewedCredentialSecretName, Namespace: clusterNS}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, secret, func() error {
		if secret.ResourceVersion != "" && !ensure.Carries(secret, managed) {
			return notOwned(secret)
		}
		secret.Labels = agentLabels(s.reg, cluster)
		secret.Type = fleet.CredentialSecretType
		secret.Data = map[string][]byte{fleet.CredentialTokenKey: []byte(token)}
		return nil
	}); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Issued the next agent credential", "cluster", clusterName, "serviceAccount", saNamespace+"/"+saName)
	s.requeueAfter = r.renewAfter()
	return nil
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
	places := []place{{r.AgentNamespace, saName}}
	for _, clusterNS := range []string{names.ClusterNamespace(reg.Namespace, cluster.Name), names.LegacyClusterNamespace(reg.Namespace, cluster.Name)} {
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
