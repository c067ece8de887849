package clusterregistration_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/clusterregistration"
	"github.com/gitfleet/fleet/controllers/clusterregistrationtoken"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/envtest"
)

const (
	systemNS   = fleet.DefaultSystemRegistrationNamespace
	agentNS    = "fleet-agents-system"
	maxPending = 3
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
				MaxPending:                  maxPending,
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
	return &fleet.ClusterRegistration{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "request-", Namespace: namespace,
			Labels:     map[string]string{fleet.RegistrationTokenLabel: token},
			Finalizers: []string{fleet.RegistrationFinalizer},
		},
		Spec: fleet.ClusterRegistrationSpec{ClientID: clientID, ClientRandom: "0123456789abcdef-" + clientID, ClusterLabels: labels},
	}
}

func accepted(ctx context.Context, g Gomega, reg *fleet.ClusterRegistration) *metav1.Condition {
	got := &fleet.ClusterRegistration{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(reg), got)).To(Succeed())
	return meta.FindStatusCondition(got.Status.Conditions, fleet.ConditionAccepted)
}

// pendingBindings counts the token read bindings the API server holds.
func pendingBindings(ctx context.Context) (int, error) {
	list := &rbacv1.RoleBindingList{}
	if err := env.List(ctx, list, client.InNamespace(systemNS), client.HasLabels{"fleet.cattle.io/registration"}); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// pickUp deletes a granted registration's credential secret, as its agent
// does once it has stored the credential.
func pickUp(ctx context.Context, reg *fleet.ClusterRegistration) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: names.CredentialSecret(reg.Spec.ClientID, reg.Spec.ClientRandom)}}
	return client.IgnoreNotFound(env.Delete(ctx, secret))
}

func TestGrant(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, token := workspace(ctx, g, "grant")
	reg := request(ns.Name, token.Name, "grant-1", map[string]string{"env": "prod", "fleet.cattle.io/cluster": "other"})
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

	secretName := names.CredentialSecret(reg.Spec.ClientID, reg.Spec.ClientRandom)
	secret := &corev1.Secret{}
	g.Expect(env.Get(ctx, types.NamespacedName{Namespace: systemNS, Name: secretName}, secret)).To(Succeed())
	g.Expect(secret.Type).To(BeEquivalentTo(fleet.CredentialSecretType))
	g.Expect(secret.Data).To(HaveKeyWithValue(fleet.CredentialClusterNameKey, []byte(clusterName)))
	g.Expect(secret.Data).To(HaveKeyWithValue(fleet.CredentialClusterNamespaceKey, []byte(clusterNS)))
	g.Expect(secret.Data[fleet.CredentialTokenKey]).NotTo(BeEmpty())
	readBinding := &rbacv1.RoleBinding{}
	g.Expect(env.Get(ctx, types.NamespacedName{Namespace: systemNS, Name: secretName}, readBinding)).To(Succeed())
	g.Expect(readBinding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind,
		Name: names.RegistrationTokenServiceAccount(ns.Name, token.Name), Namespace: systemNS}))

	// The agent fetches its credential and deletes the secret: the token's
	// right to read it goes.
	g.Expect(pickUp(ctx, reg)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Get(ctx, types.NamespacedName{Namespace: systemNS, Name: secretName}, &rbacv1.RoleBinding{}))
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the token read binding withdrawn after pickup")
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

func TestPendingBoundHoldsAsSeenFromTheAPIServer(t *testing.T) {
	const n = 12
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := NewWithT(t)
	ns, token := workspace(ctx, g, "bound")
	g.Eventually(pendingBindings).WithContext(ctx).WithTimeout(30*time.Second).Should(BeZero(), "no credential of another test waiting")

	// Watch the API server for as long as the test runs.
	var (
		mu      sync.Mutex
		peak    int
		sampled = make(chan struct{})
	)
	go func() {
		defer close(sampled)
		for ctx.Err() == nil {
			if c, err := pendingBindings(ctx); err == nil {
				mu.Lock()
				peak = max(peak, c)
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	regs := make([]*fleet.ClusterRegistration, n)
	var wg sync.WaitGroup
	for i := range n {
		regs[i] = request(ns.Name, token.Name, fmt.Sprint("bound-", i), nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.Expect(env.Create(ctx, regs[i])).To(Succeed())
		}()
	}
	wg.Wait()

	// With no agent fetching anything, exactly maxPending are granted and
	// the others say they wait.
	status := func(g Gomega) (granted, waiting int) {
		for _, reg := range regs {
			switch c := accepted(ctx, g, reg); {
			case c == nil:
			case c.Reason == fleet.ReasonGranted:
				granted++
			case c.Status == metav1.ConditionUnknown && c.Reason == fleet.ReasonPendingBound:
				waiting++
			}
		}
		return granted, waiting
	}
	g.Eventually(func(g Gomega) {
		granted, waiting := status(g)
		g.Expect(granted).To(Equal(maxPending))
		g.Expect(waiting).To(Equal(n - maxPending))
	}).WithTimeout(30*time.Second).Should(Succeed(), "the bound reached and the others waiting")

	// Agents fetch their credentials as they come: all are granted in turn.
	g.Eventually(func(g Gomega) {
		for _, reg := range regs {
			if c := accepted(ctx, g, reg); c != nil && c.Reason == fleet.ReasonGranted {
				g.Expect(pickUp(ctx, reg)).To(Succeed())
			}
		}
		granted, _ := status(g)
		g.Expect(granted).To(Equal(n))
	}).WithTimeout(60*time.Second).Should(Succeed(), "every registration granted")
	cancel()
	<-sampled
	mu.Lock()
	defer mu.Unlock()
	g.Expect(peak).To(And(BeNumerically(">", 0), BeNumerically("<=", maxPending)), "pending token read bindings at once")
}
