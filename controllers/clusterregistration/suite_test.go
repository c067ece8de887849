package clusterregistration_test

import (
	"context"
	"crypto/ecdh"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/clusterregistration"
	"github.com/gitfleet/fleet/controllers/clusterregistrationtoken"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/registration"
	"github.com/gitfleet/fleet/internal/satoken"
	"github.com/gitfleet/fleet/test/envtest"
)

const (
	systemNS = fleet.DefaultSystemRegistrationNamespace
	agentNS  = "fleet-agents-system"
	// renewAfter is how old an agent's newest token gets before the
	// manager issues the next one: short, so that a test sees it.
	renewAfter = 3 * time.Second
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:          m,
		Name:       "clusterregistration",
		Namespaces: []string{systemNS},
		SetupReconcilers: func(ctx context.Context, mgr ctrl.Manager) error {
			// The cache is not started yet: the shared roles go through a
			// direct client, as the manager makes them.
			direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
			if err != nil {
				return err
			}
			if err := clusterregistration.EnsureSharedRoles(ctx, direct, agentNS); err != nil {
				return err
			}
			if err := (&clusterregistrationtoken.Reconciler{Client: mgr.GetClient(), SystemRegistrationNamespace: systemNS,
				APIServerURL: "https://fleet.example:6443"}).SetupWithManager(mgr); err != nil {
				return err
			}
			return (&clusterregistration.Reconciler{
				Client:                      mgr.GetClient(),
				SystemRegistrationNamespace: systemNS,
				AgentNamespace:              agentNS,
				Workers:                     8,
				CredentialLifetime:          time.Hour,
				CredentialRenewAfter:        renewAfter,
			}).SetupWithManager(ctx, mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

// workspace makes a namespace for one test, with a registration token in
// it.
func workspace(ctx context.Context, g Gomega, prefix string) (*corev1.Namespace, *fleet.ClusterRegistrationToken) {
	ns, err := env.CreateNamespace(ctx, prefix)
	g.Expect(err).NotTo(HaveOccurred())
	token := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: ns.Name}}
	g.Expect(env.CreateAndWait(ctx, token)).To(Succeed())
	return ns, token
}

// request is what an agent creates to register.
func request(namespace, token, clientID string, labels map[string]string) *fleet.ClusterRegistration {
	reg, _ := requestWithKey(namespace, token, clientID, labels)
	return reg
}

// requests numbers the requests of the suite, so that each has a name of its
// own before it is made (its proof covers it).
var requests atomic.Int64

// requestWithKey is request with the key the credential is sealed to. It
// proves holding token, as an agent does, with the values the manager
// issued for it.
func requestWithKey(namespace, token, clientID string, labels map[string]string) (*fleet.ClusterRegistration, *ecdh.PrivateKey) {
	key, err := registration.NewKey()
	if err != nil {
		panic(err)
	}
	reg := &fleet.ClusterRegistration{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("request-%d", requests.Add(1)), Namespace: namespace,
			Labels:     map[string]string{fleet.RegistrationTokenLabel: token},
			Finalizers: []string{fleet.RegistrationFinalizer},
		},
		Spec: fleet.ClusterRegistrationSpec{ClientID: clientID, ClientRandom: "0123456789abcdef-" + clientID, ClusterLabels: labels,
			PublicKey: registration.EncodePublicKey(key)},
	}
	registration.Prove(tokenValue(namespace, token), reg)
	return reg, key
}

// tokenValue is the value of the registration token namespace/name, once
// the manager has issued it ("" if there is no such token).
func tokenValue(namespace, name string) string {
	token := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if apierrors.IsNotFound(env.Get(context.Background(), client.ObjectKeyFromObject(token), token)) {
		return ""
	}
	values, err := agentinstall.WaitForToken(context.Background(), env, token, 30*time.Second)
	if err != nil {
		return ""
	}
	return values.Token
}

func accepted(ctx context.Context, g Gomega, reg *fleet.ClusterRegistration) *metav1.Condition {
	got := &fleet.ClusterRegistration{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(reg), got)).To(Succeed())
	return meta.FindStatusCondition(got.Status.Conditions, fleet.ConditionAccepted)
}

func TestGrant(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, token := workspace(ctx, g, "grant")
	reg, key := requestWithKey(ns.Name, token.Name, "grant-1", map[string]string{"env": "prod", "fleet.cattle.io/cluster": "other"})
	g.Expect(env.Create(ctx, reg)).To(Succeed())

	g.Eventually(func(g Gomega) {
		c := accepted(ctx, g, reg)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(fleet.ReasonGranted))
	}).WithTimeout(30*time.Second).Should(Succeed(), "the registration accepted")
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(reg), reg)).To(Succeed())
	g.Expect(reg.Status.Granted).To(BeTrue())
	clusterName := names.ClusterForClientID("grant-1")
	g.Expect(reg.Status.ClusterName).To(Equal(clusterName))

	cluster := &fleet.Cluster{}
	g.Expect(env.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: clusterName}, cluster)).To(Succeed())
	g.Expect(cluster.Spec.ClientID).To(Equal("grant-1"))
	g.Expect(cluster.Labels).To(HaveKeyWithValue("env", "prod"))
	g.Expect(cluster.Labels).NotTo(HaveKey("fleet.cattle.io/cluster"), "an agent may not set fleet's own labels")

	clusterNS := names.ClusterNamespace(ns.Name, clusterName)
	g.Expect(env.Get(ctx, types.NamespacedName{Name: clusterNS}, &corev1.Namespace{})).To(Succeed())
	// Named after the grant, not after the registration (a name the
	// requester chose), in the agents' namespace, whose group alone is
	// bound to read Contents.
	saName := names.AgentServiceAccount(ns.Name, clusterName, reg.Spec.ClientID, reg.Spec.ClientRandom)
	sa := &corev1.ServiceAccount{}
	g.Expect(env.Get(ctx, types.NamespacedName{Namespace: agentNS, Name: saName}, sa)).To(Succeed())
	g.Expect(sa.Labels).To(HaveKeyWithValue(fleet.ClusterLabel, clusterName), "found by its Cluster when that is deleted")
	g.Expect(sa.Labels).To(HaveKeyWithValue(fleet.ClusterNamespaceLabel, ns.Name))
	agentBinding := &rbacv1.RoleBinding{}
	g.Expect(env.Get(ctx, types.NamespacedName{Namespace: clusterNS, Name: saName}, agentBinding)).To(Succeed())
	g.Expect(agentBinding.RoleRef.Name).To(Equal(clusterregistration.AgentRole))
	g.Expect(agentBinding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: saName, Namespace: agentNS}))

	// Nothing per agent where the API server weighs it on every request:
	// no ClusterRoleBinding, nothing in the workspace namespace.
	crbs := &rbacv1.ClusterRoleBindingList{}
	g.Expect(env.List(ctx, crbs)).To(Succeed())
	for _, b := range crbs.Items {
		for _, sub := range b.Subjects {
			g.Expect(sub.Namespace).NotTo(Equal(agentNS), "ClusterRoleBinding %s names an agent", b.Name)
		}
	}
	wsRoles, wsBindings := &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}
	g.Expect(env.List(ctx, wsRoles, client.InNamespace(ns.Name))).To(Succeed())
	g.Expect(env.List(ctx, wsBindings, client.InNamespace(ns.Name))).To(Succeed())
	for _, r := range wsRoles.Items {
		for _, rule := range r.Rules {
			g.Expect(rule.Resources).NotTo(ContainElement("clusters/status"), "Role %s lets someone patch Cluster status", r.Name)
		}
	}
	for _, b := range wsBindings.Items {
		for _, sub := range b.Subjects {
			g.Expect(sub.Namespace).NotTo(Equal(agentNS), "RoleBinding %s in the workspace namespace names an agent", b.Name)
		}
	}
	shared := &rbacv1.ClusterRoleBinding{}
	g.Expect(env.Get(ctx, types.NamespacedName{Name: clusterregistration.ContentReaderBinding}, shared)).To(Succeed())
	g.Expect(shared.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + agentNS}))
	g.Expect(shared.RoleRef.Name).To(Equal(clusterregistration.ContentReaderRole))

	// The credential, sealed to the request's key in the status; nothing
	// for the registering token anywhere else.
	g.Expect(reg.Status.SealedCredential).NotTo(BeEmpty())
	cred, err := registration.Open(key, reg.Namespace, reg.Name, reg.Status.SealedCredential)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cred.ClusterName).To(Equal(clusterName))
	g.Expect(cred.ClusterNamespace).To(Equal(clusterNS))
	g.Expect(cred.Namespace).To(Equal(ns.Name))
	claims, err := satoken.Parse(cred.Token)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(claims.Namespace + "/" + claims.ServiceAccount).To(Equal(agentNS + "/" + saName))
	g.Expect(claims.Lifetime()).To(Equal(time.Hour))
	other, err := registration.NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = registration.Open(other, reg.Namespace, reg.Name, reg.Status.SealedCredential)
	g.Expect(err).To(HaveOccurred(), "another key opens nothing")
	for _, list := range []client.ObjectList{&corev1.SecretList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}} {
		g.Expect(env.List(ctx, list, client.InNamespace(systemNS), client.MatchingLabels{"fleet.cattle.io/registration": reg.Name})).To(Succeed())
		g.Expect(meta.LenList(list)).To(BeZero(), "%T written for the grant in the system registration namespace", list)
	}
	// No per-agent right to mint tokens: the manager issues the next one.
	roles := &rbacv1.RoleList{}
	g.Expect(env.List(ctx, roles, client.InNamespace(agentNS))).To(Succeed())
	g.Expect(roles.Items).To(BeEmpty(), "Roles in the agents' namespace")
}

// The manager issues the agent's next token into its cluster namespace
// when the newest is renewAfter old, again and again, for the agent's own
// ServiceAccount; revoking the registration ends it.
func TestRenewal(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, token := workspace(ctx, g, "renewal")
	reg := request(ns.Name, token.Name, "renewal-1", nil)
	g.Expect(env.Create(ctx, reg)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(reg), reg)).To(Succeed())
		g.Expect(reg.Status.Granted).To(BeTrue())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	sa := names.AgentServiceAccount(ns.Name, reg.Status.ClusterName, reg.Spec.ClientID, reg.Spec.ClientRandom)
	key := types.NamespacedName{Namespace: names.ClusterNamespace(ns.Name, reg.Status.ClusterName), Name: fleet.RenewedCredentialSecretName}

	var seen []satoken.Claims
	g.Eventually(func(g Gomega) {
		secret := &corev1.Secret{}
		g.Expect(env.Get(ctx, key, secret)).To(Succeed())
		g.Expect(secret.Labels).To(HaveKeyWithValue(fleet.ManagedLabel, "true"))
		c, err := satoken.Parse(string(secret.Data[fleet.CredentialTokenKey]))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Namespace + "/" + c.ServiceAccount).To(Equal(agentNS + "/" + sa))
		g.Expect(c.Lifetime()).To(Equal(time.Hour))
		if len(seen) == 0 || c.IssuedAt.After(seen[len(seen)-1].IssuedAt) {
			seen = append(seen, c)
		}
		g.Expect(seen).To(HaveLen(2), "two tokens issued one after the other")
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the next token issued, twice")

	g.Expect(env.Delete(ctx, reg)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Get(ctx, types.NamespacedName{Namespace: agentNS, Name: sa}, &corev1.ServiceAccount{}))
	}).WithTimeout(30*time.Second).Should(BeTrue(), "revoked with the registration: every token of its ServiceAccount with it")
}

func TestRefusalsAreRecordedAsAcceptedFalse(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns, token := workspace(ctx, g, "refused")
	taken := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: names.ClusterForClientID("conflict")},
		Spec: fleet.ClusterSpec{ClientID: "someone-else"}}
	g.Expect(env.CreateAndWait(ctx, taken)).To(Succeed())

	cases := []struct {
		name   string
		reg    *fleet.ClusterRegistration
		reason string
		says   string
	}{{
		name:   "token missing",
		reg:    request(ns.Name, "no-such-token", "no-token", nil),
		reason: fleet.ReasonTokenNotFound, says: "fleet install agent-token",
	}, {
		name: "invalid request",
		reg: func() *fleet.ClusterRegistration {
			r := request(ns.Name, token.Name, "invalid", nil)
			r.Spec.ClientRandom = "short"
			return r
		}(),
		reason: fleet.ReasonInvalidRegistration, says: "spec.clientRandom",
	}, {
		name:   "identity conflict",
		reg:    request(ns.Name, token.Name, "conflict", nil),
		reason: fleet.ReasonIdentityConflict, says: "delete that Cluster",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(env.Create(ctx, tc.reg)).To(Succeed())
			g.Eventually(func(g Gomega) {
				c := accepted(ctx, g, tc.reg)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(tc.reason))
				g.Expect(c.Message).To(ContainSubstring(tc.says))
			}).WithTimeout(30*time.Second).Should(Succeed(), "the refusal recorded")
			got := &fleet.ClusterRegistration{}
			g.Expect(env.Get(ctx, client.ObjectKeyFromObject(tc.reg), got)).To(Succeed())
			g.Expect(got.Status.Granted).To(BeFalse())
			g.Expect(apierrors.IsNotFound(env.Get(ctx, types.NamespacedName{Namespace: systemNS,
				Name: names.CredentialSecret(tc.reg.Spec.ClientID, tc.reg.Spec.ClientRandom)}, &corev1.Secret{}))).To(BeTrue(), "no credential")
		})
	}
	// Nothing was made for the refused requests.
	list := &fleet.ClusterList{}
	g.Expect(env.List(ctx, list, client.InNamespace(ns.Name))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1), "only the Cluster made beforehand")
}

// Many registrations at once are all granted, each with one status write
// and nothing held back.
func TestGrantsAtOnce(t *testing.T) {
	const n = 12
	ctx := context.Background()
	g := NewWithT(t)
	ns, token := workspace(ctx, g, "many")
	regs := make([]*fleet.ClusterRegistration, n)
	var wg sync.WaitGroup
	for i := range n {
		regs[i] = request(ns.Name, token.Name, fmt.Sprint("many-", i), nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.Expect(env.Create(ctx, regs[i])).To(Succeed())
		}()
	}
	wg.Wait()
	g.Eventually(func(g Gomega) {
		for _, reg := range regs {
			got := &fleet.ClusterRegistration{}
			g.Expect(env.Get(ctx, client.ObjectKeyFromObject(reg), got)).To(Succeed())
			g.Expect(got.Status.Granted).To(BeTrue(), "registration %s", reg.Name)
			g.Expect(got.Status.SealedCredential).NotTo(BeEmpty())
		}
	}).WithTimeout(60*time.Second).Should(Succeed(), "every registration granted")
	clusters := &fleet.ClusterList{}
	g.Expect(env.List(ctx, clusters, client.InNamespace(ns.Name))).To(Succeed())
	g.Expect(clusters.Items).To(HaveLen(n))
}

// A grant that fails after making the agent's ServiceAccount (here: a
// RoleBinding of the grant's name that someone else made stands in its
// way) names no Cluster in the registration's status. Deleting that
// registration still deletes the ServiceAccount, and with it the token the
// grant minted, and leaves alone what the grant did not make.
func TestDeletingAnUnfinishedGrantRevokesIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, token := workspace(ctx, g, "unfinished")
	reg := request(ns.Name, token.Name, "unfinished-1", nil)
	clusterName := names.ClusterForClientID(reg.Spec.ClientID)
	clusterNS := names.ClusterNamespace(ns.Name, clusterName)
	saName := names.AgentServiceAccount(ns.Name, clusterName, reg.Spec.ClientID, reg.Spec.ClientRandom)
	g.Expect(env.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS, Labels: map[string]string{
		fleet.ManagedLabel: "true", fleet.ClusterLabel: clusterName, fleet.ClusterNamespaceLabel: ns.Name}}})).To(Succeed())
	foreign := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: saName, Namespace: clusterNS},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "someone"}},
	}
	g.Expect(env.Create(ctx, foreign)).To(Succeed())

	g.Expect(env.Create(ctx, reg)).To(Succeed())
	saKey := types.NamespacedName{Namespace: agentNS, Name: saName}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Get(ctx, saKey, &corev1.ServiceAccount{})).To(Succeed())
		c := accepted(ctx, g, reg)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	}).WithTimeout(30*time.Second).Should(Succeed(), "the grant made the ServiceAccount, then stopped at the foreign binding")
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(reg), reg)).To(Succeed())
	g.Expect(reg.Status.ClusterName).To(BeEmpty())

	g.Expect(env.Delete(ctx, reg)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Get(ctx, client.ObjectKeyFromObject(reg), &fleet.ClusterRegistration{}))
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the registration's finalizer done")
	g.Expect(apierrors.IsNotFound(env.Get(ctx, saKey, &corev1.ServiceAccount{}))).To(BeTrue(),
		"the ServiceAccount of the unfinished grant deleted with its registration")
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(foreign), &rbacv1.RoleBinding{})).To(Succeed(), "what the grant did not make is left alone")
}

// Deleting a token's values Secret (by mistake, or by a tenant who may
// delete Secrets) re-issues the token: the values handed out before stop
// working, rather than keep authenticating with a proof the manager can no
// longer check, and registrations with the new values are granted.
func TestTokenValuesReissuedRevokeTheOldOnes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, token := workspace(ctx, g, "reissue")
	old := tokenValue(ns.Name, token.Name)
	g.Expect(old).NotTo(BeEmpty())
	authenticated := func(bearer string) bool {
		review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: bearer}}
		g.Expect(env.Create(ctx, review)).To(Succeed())
		return review.Status.Authenticated
	}
	g.Expect(authenticated(old)).To(BeTrue())

	// As an earlier version left it: the ServiceAccount not marked as
	// having had values issued. The manager marks it.
	saKey := types.NamespacedName{Namespace: systemNS, Name: names.RegistrationTokenServiceAccount(ns.Name, token.Name)}
	sa := &corev1.ServiceAccount{}
	g.Expect(env.Get(ctx, saKey, sa)).To(Succeed())
	g.Expect(sa.Annotations).To(HaveKey("fleet.cattle.io/values-issued"))
	g.Expect(env.Patch(ctx, sa, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"fleet.cattle.io/values-issued":null}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Get(ctx, saKey, sa)).To(Succeed())
		g.Expect(sa.Annotations).To(HaveKey("fleet.cattle.io/values-issued"))
	}).WithTimeout(30*time.Second).Should(Succeed(), "values issued by an earlier version are marked")

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: names.RegistrationTokenSecret(token.Name)}}
	g.Expect(env.Delete(ctx, secret)).To(Succeed())
	var fresh string
	g.Eventually(func() string {
		fresh = tokenValue(ns.Name, token.Name)
		return fresh
	}).WithTimeout(30*time.Second).ShouldNot(Or(BeEmpty(), Equal(old)), "new values issued")
	g.Eventually(func() bool { return authenticated(old) }).WithTimeout(30*time.Second).Should(BeFalse(), "the old values revoked")
	g.Expect(authenticated(fresh)).To(BeTrue())

	reg := request(ns.Name, token.Name, "reissue-1", nil)
	g.Expect(env.Create(ctx, reg)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(reg), reg)).To(Succeed())
		g.Expect(reg.Status.Granted).To(BeTrue())
	}).WithTimeout(30*time.Second).Should(Succeed(), "granted with the new values")
}

// A request its agent gave up waiting for (it made a newer one, of the same
// identity and token, after it) is deleted when the manager gets to it, not
// granted: granting it would only be undone by the newer one's grant.
func TestAbandonedRequestIsDeletedNotGranted(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns, _ := workspace(ctx, g, "abandoned")
	// A token that does not exist yet keeps both requests waiting.
	first := request(ns.Name, "later-token", "gave-up", nil)
	g.Expect(env.Create(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(accepted(ctx, g, first)).NotTo(BeNil())
	}).WithTimeout(30*time.Second).Should(Succeed(), "the first request looked at")
	// Creation times count whole seconds.
	time.Sleep(1100 * time.Millisecond)
	second := request(ns.Name, "later-token", "gave-up", nil)
	g.Expect(env.Create(ctx, second)).To(Succeed())
	// The manager gets to the first request again (any change of it).
	patch := client.MergeFrom(first.DeepCopy())
	first.Annotations = map[string]string{"test": "again"}
	g.Expect(env.Patch(ctx, first, patch)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Get(ctx, client.ObjectKeyFromObject(first), &fleet.ClusterRegistration{}))
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the request given up is deleted")
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(second), &fleet.ClusterRegistration{})).To(Succeed(), "the newer one stays")
}
