package clusterregistration_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/internal/names"
)

// The agent may renew its own token, no other: granted with the rest of its
// access, given again to a registration granted without it, and revoked
// with the registration.
func TestRotationAccess(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, token := workspace(ctx, g, "rotation")
	reg := request(ns.Name, token.Name, "rotation-1", nil)
	g.Expect(env.Create(ctx, reg)).To(Succeed())
	// A failed check must not leave a credential waiting: it would count
	// against the pending bound of the tests after this one.
	t.Cleanup(func() { _ = client.IgnoreNotFound(env.Delete(context.Background(), reg)) })
	g.Eventually(func(g Gomega) {
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(reg), reg)).To(Succeed())
		g.Expect(reg.Status.Granted).To(BeTrue())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	sa := names.AgentServiceAccount(ns.Name, reg.Status.ClusterName, reg.Spec.ClientID, reg.Spec.ClientRandom)
	// In the agents' namespace, beside the ServiceAccount: a token is
	// requested in the ServiceAccount's namespace.
	key := types.NamespacedName{Namespace: agentNS, Name: sa + "-token"}

	role, binding := &rbacv1.Role{}, &rbacv1.RoleBinding{}
	g.Expect(env.Get(ctx, key, role)).To(Succeed())
	g.Expect(role.Rules).To(ConsistOf(rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}, ResourceNames: []string{sa},
	}))
	g.Expect(env.Get(ctx, key, binding)).To(Succeed())
	g.Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: agentNS}))

	// Granted by a manager that did not give the right: the next reconcile
	// gives it.
	g.Expect(env.Delete(ctx, role)).To(Succeed())
	// Until the manager's cache has seen the deletion, a reconcile finds the
	// Role there and has nothing to do (an upgraded manager never had one).
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Manager.GetCache().Get(ctx, key, &rbacv1.Role{}))
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the manager's cache sees the Role gone")
	patch := client.MergeFrom(reg.DeepCopy())
	reg.Annotations = map[string]string{"test/touch": "1"}
	g.Expect(env.Patch(ctx, reg, patch)).To(Succeed())
	g.Eventually(func() error { return env.Get(ctx, key, &rbacv1.Role{}) }).WithTimeout(30 * time.Second).Should(Succeed())

	g.Expect(env.Delete(ctx, reg)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Get(ctx, key, &rbacv1.Role{})) && apierrors.IsNotFound(env.Get(ctx, key, &rbacv1.RoleBinding{})) &&
			apierrors.IsNotFound(env.Get(ctx, types.NamespacedName{Namespace: agentNS, Name: sa}, &corev1.ServiceAccount{}))
	}).WithTimeout(30*time.Second).Should(BeTrue(), "revoked with the registration, ServiceAccount and all")
}
