package registration

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentjoin "github.com/gitfleet/fleet/agent/join"
	"github.com/gitfleet/fleet/agent/kinds"
	agentupstream "github.com/gitfleet/fleet/agent/upstream"
	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// agentArgs are the flags of every agent here: quick check-ins and retries.
var agentArgs = []string{"--checkin-interval", "2s", "--min-backoff", "100ms", "--max-backoff", "2s", "--bootstrap-check-interval", "500ms"}

// registerTimeout bounds an agent's registration.
const registerTimeout = 60 * time.Second

// tokenRegistration is what the steps of TokenRegistrationSpec share.
type tokenRegistration struct {
	ctx         context.Context
	input       SpecInput
	upstream    *controlplane.ControlPlane
	downstreams []*controlplane.ControlPlane
	admin       client.Client
	prod, other *e2e.JoinedCluster
}

// start starts an agent for j that stops when the spec ends.
func (s *tokenRegistration) start(j *e2e.JoinedCluster) {
	GinkgoHelper()
	j.StartAgent()
	DeferCleanup(j.Agent.Stop)
}

// join registers a downstream cluster exactly as a user would: print the
// manifests with the CLI, apply them downstream, start the agent from them.
func (s *tokenRegistration) join(cp *controlplane.ControlPlane, systemNamespace string, configArgs ...string) *e2e.JoinedCluster {
	GinkgoHelper()
	j := e2e.NewJoinedCluster(e2e.JoinInput{Upstream: s.upstream, Downstream: cp, Admin: s.admin, LogDir: s.input.LogDir,
		SystemNamespace: systemNamespace, ConfigArgs: configArgs, AgentArgs: agentArgs})
	j.ApplyToken(s.ctx)
	j.ApplyConfig(s.ctx)
	s.start(j)
	return j
}

// TokenRegistrationSpec registers downstream clusters with tokens, through
// the real CLI and agent, and checks what the credentials they get may do,
// that a grant leaves nothing for the registering token but its sealed
// status, that an expired token is refused, that a cluster re-registers onto
// the same Cluster, and that fifty clusters register at once. Call it in an
// Ordered container.
func TokenRegistrationSpec(ctx context.Context, inputGetter func() SpecInput) {
	s := &tokenRegistration{ctx: ctx}
	BeforeAll(func() {
		s.input = inputGetter()
		s.input.validate("TokenRegistrationSpec")
		s.upstream, s.downstreams, s.admin = s.input.Upstream, s.input.Downstreams, s.input.Admin
	})

	registerSteps(s)
	tokenSteps(s)
	reRegisterSteps(s)
	manyClustersSteps(s)
}

// registerSteps: a cluster registers from the CLI's manifests, with a
// credential of exactly the agent's rights.
func registerSteps(s *tokenRegistration) {
	It("registers a cluster from the agent-token and agent-config manifests", func() {
		s.prod = s.join(s.downstreams[0], fleet.DefaultSystemNamespace, "-l", "env=prod", "-l", "fleet.cattle.io/evil=1")
		s.prod.WaitRegistered(s.ctx, registerTimeout)

		uid, err := s.downstreams[0].KubeSystemUID(s.ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.prod.Cluster.Spec.ClientID).To(Equal(string(uid)), "the identity is the kube-system UID")
		Expect(s.prod.Cluster.Labels).To(HaveKeyWithValue("env", "prod"))
		Expect(s.prod.Cluster.Labels).NotTo(HaveKey("fleet.cattle.io/evil"), "agents may not set fleet's own labels")
		Expect(s.prod.Cluster.Name).To(Equal(names.ClusterForClientID(string(uid))))

		ns := &corev1.Namespace{}
		Expect(s.admin.Get(s.ctx, types.NamespacedName{Name: s.prod.Cred.ClusterNamespace}, ns)).To(Succeed())
		Expect(s.prod.Cred.ClusterNamespace).To(Equal(names.ClusterNamespace(fleet.DefaultWorkspace, s.prod.Cluster.Name)))

		err = s.prod.Local.Get(s.ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentBootstrapSecretName}, &corev1.Secret{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the cluster forgets the token: %v", err)

		// The check-in, a Lease the agent renews in its cluster namespace,
		// reaches the Cluster's status through the manager.
		Eventually(func(g Gomega) {
			c := &fleet.Cluster{}
			g.Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(s.prod.Cluster), c)).To(Succeed())
			g.Expect(c.Status.Agent.LastSeen.IsZero()).To(BeFalse(), "agent log:\n%s", s.prod.Agent.Output())
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("gives the credential exactly the agent's rights", func() {
		s.other = s.join(s.downstreams[1], fleet.DefaultSystemNamespace, "-l", "env=dev")
		s.other.WaitRegistered(s.ctx, registerTimeout)

		// Objects the agents will be tested against, made by an admin.
		content := &fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: "s-rights-test"}, Content: []byte("x")}
		Expect(s.admin.Create(s.ctx, content)).To(Succeed())
		bd := func(ns string) *fleet.BundleDeployment {
			b := &fleet.BundleDeployment{
				ObjectMeta: metav1.ObjectMeta{Name: "rights-test", Namespace: ns},
				Spec:       fleet.BundleDeploymentSpec{DeploymentID: "s-rights-test:1"},
			}
			Expect(s.admin.Create(s.ctx, b)).To(Succeed())
			return b
		}
		own, theirs := bd(s.prod.Cred.ClusterNamespace), bd(s.other.Cred.ClusterNamespace)
		secretIn := func(ns string) *corev1.Secret {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rights-test", Namespace: ns}, StringData: map[string]string{"k": "v"}}
			Expect(s.admin.Create(s.ctx, secret)).To(Succeed())
			return secret
		}
		ownSecret := secretIn(s.prod.Cred.ClusterNamespace)
		secretIn(s.other.Cred.ClusterNamespace)
		systemSecret := secretIn(fleet.DefaultSystemNamespace)

		c := s.prod.CredClient()

		By("allowed")
		list := &fleet.BundleDeploymentList{}
		Expect(c.List(s.ctx, list, client.InNamespace(s.prod.Cred.ClusterNamespace))).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
		w, err := c.Watch(s.ctx, &fleet.BundleDeploymentList{}, client.InNamespace(s.prod.Cred.ClusterNamespace))
		Expect(err).NotTo(HaveOccurred())
		w.Stop()
		patch := client.MergeFrom(own.DeepCopy())
		own.Status.AppliedDeploymentID = own.Spec.DeploymentID
		Expect(c.Status().Patch(s.ctx, own, patch)).To(Succeed())
		Expect(c.Get(s.ctx, client.ObjectKeyFromObject(ownSecret), &corev1.Secret{})).To(Succeed())
		Expect(c.Get(s.ctx, client.ObjectKeyFromObject(content), &fleet.Content{})).To(Succeed())
		// Its check-in Lease: read and renewed (the running agent made it).
		ownLease := &coordinationv1.Lease{}
		Expect(c.Get(s.ctx, types.NamespacedName{Namespace: s.prod.Cred.ClusterNamespace, Name: fleet.AgentLeaseName}, ownLease)).To(Succeed())
		now := metav1.NowMicro()
		Expect(checkin.Write(s.ctx, c, s.prod.Cred.ClusterNamespace, coordinationv1.LeaseSpec{RenewTime: &now}, nil)).To(Succeed())
		// The other agent's Lease and ServiceAccount, read as an admin.
		Eventually(func() error {
			return s.admin.Get(s.ctx, types.NamespacedName{Namespace: s.other.Cred.ClusterNamespace, Name: fleet.AgentLeaseName}, &coordinationv1.Lease{})
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "the other agent checked in")
		theirLease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.other.Cred.ClusterNamespace, Name: fleet.AgentLeaseName}}
		theirClaims, err := agentupstream.ParseToken(s.other.Cred.Token)
		Expect(err).NotTo(HaveOccurred())
		ownClaims, err := agentupstream.ParseToken(s.prod.Cred.Token)
		Expect(err).NotTo(HaveOccurred())
		Expect(ownClaims.Namespace).To(Equal(theirClaims.Namespace), "every agent's ServiceAccount lives in the agents' namespace")
		Expect(ownClaims.Namespace).NotTo(Equal(s.prod.Cred.ClusterNamespace))
		By("forbidden")
		forbidden := func(what string, err error) {
			GinkgoHelper()
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s must be forbidden, got: %v", what, err)
		}
		forbidden("listing another cluster's BundleDeployments",
			c.List(s.ctx, &fleet.BundleDeploymentList{}, client.InNamespace(s.other.Cred.ClusterNamespace)))
		forbidden("getting another cluster's BundleDeployment", c.Get(s.ctx, client.ObjectKeyFromObject(theirs), &fleet.BundleDeployment{}))
		spec := own.DeepCopy()
		spec.Spec.DeploymentID = "s-evil:1"
		forbidden("updating a BundleDeployment's spec", c.Update(s.ctx, spec))
		forbidden("creating a BundleDeployment", c.Create(s.ctx, &fleet.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "evil", Namespace: s.prod.Cred.ClusterNamespace}}))
		forbidden("patching another cluster's BundleDeployment status", c.Status().Patch(s.ctx, theirs.DeepCopy(),
			client.RawPatch(types.MergePatchType, []byte(`{"status":{"ready":true}}`))))
		forbidden("reading a Secret outside its namespace", c.Get(s.ctx, client.ObjectKeyFromObject(systemSecret), &corev1.Secret{}))
		forbidden("listing Secrets in its own namespace", c.List(s.ctx, &corev1.SecretList{}, client.InNamespace(s.prod.Cred.ClusterNamespace)))
		forbidden("patching another Cluster's status", c.Status().Patch(s.ctx, s.other.Cluster.DeepCopy(),
			client.RawPatch(types.MergePatchType, []byte(`{"status":{"agent":{"namespace":"x"}}}`))))
		forbidden("patching its own Cluster's status (the workspace namespace is out of reach)", c.Status().Patch(s.ctx, s.prod.Cluster.DeepCopy(),
			client.RawPatch(types.MergePatchType, []byte(`{"status":{"agent":{"namespace":"fleet-system"}}}`))))
		forbidden("reading another agent's Lease", c.Get(s.ctx, client.ObjectKeyFromObject(theirLease), &coordinationv1.Lease{}))
		forbidden("renewing another agent's Lease", checkin.Write(s.ctx, c, s.other.Cred.ClusterNamespace, coordinationv1.LeaseSpec{RenewTime: &now}, nil))
		forbidden("deleting another agent's Lease", c.Delete(s.ctx, theirLease.DeepCopy()))
		forbidden("deleting its own Lease", c.Delete(s.ctx, ownLease.DeepCopy()))
		forbidden("listing Leases in its own namespace", c.List(s.ctx, &coordinationv1.LeaseList{}, client.InNamespace(s.prod.Cred.ClusterNamespace)))
		forbidden("reading another cluster's Secret", c.Get(s.ctx, types.NamespacedName{Namespace: s.other.Cred.ClusterNamespace, Name: "rights-test"}, &corev1.Secret{}))
		forbidden("creating a ServiceAccount in the agents' namespace", c.Create(s.ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Namespace: ownClaims.Namespace, Name: "evil-agent"}}))
		forbidden("creating a ServiceAccount in its own namespace", c.Create(s.ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.prod.Cred.ClusterNamespace, Name: "evil-agent"}}))
		forbidden("deleting another agent's ServiceAccount", c.Delete(s.ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Namespace: theirClaims.Namespace, Name: theirClaims.ServiceAccount}}))
		seconds := int64(3600)
		forbidden("requesting a token for another agent's ServiceAccount", c.SubResource("token").Create(s.ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: theirClaims.Namespace, Name: theirClaims.ServiceAccount}},
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}))
		forbidden("requesting a token for its own ServiceAccount (the manager issues the next one)", c.SubResource("token").Create(s.ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ownClaims.Namespace, Name: ownClaims.ServiceAccount}},
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}))
		forbidden("reading another cluster's next token", c.Get(s.ctx, types.NamespacedName{Namespace: s.other.Cred.ClusterNamespace,
			Name: fleet.RenewedCredentialSecretName}, &corev1.Secret{}))
		forbidden("getting a ClusterRegistration", c.Get(s.ctx, types.NamespacedName{Namespace: fleet.DefaultWorkspace, Name: "any"}, &fleet.ClusterRegistration{}))
		forbidden("listing the agents' ServiceAccounts", c.List(s.ctx, &corev1.ServiceAccountList{}, client.InNamespace(ownClaims.Namespace)))
		forbidden("updating its own Cluster's spec", c.Patch(s.ctx, s.prod.Cluster.DeepCopy(),
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"env":"hacked"}}}`))))
		forbidden("listing Clusters", c.List(s.ctx, &fleet.ClusterList{}, client.InNamespace(fleet.DefaultWorkspace)))
		forbidden("listing Contents", c.List(s.ctx, &fleet.ContentList{}))
		forbidden("creating ClusterRegistrations", c.Create(s.ctx, &fleet.ClusterRegistration{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "evil-", Namespace: fleet.DefaultWorkspace},
			Spec:       fleet.ClusterRegistrationSpec{ClientID: "x", ClientRandom: "0123456789abcdef0123"}}))
		// What earlier versions handed credentials over in.
		pending := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rights-test", Namespace: fleet.DefaultSystemRegistrationNamespace},
			Type: fleet.CredentialSecretType, StringData: map[string]string{"token": "x"}}
		Expect(s.admin.Create(s.ctx, pending)).To(Succeed())
		creds := &corev1.SecretList{}
		Expect(s.admin.List(s.ctx, creds, client.InNamespace(fleet.DefaultSystemRegistrationNamespace))).To(Succeed())
		for _, secret := range creds.Items {
			forbidden("reading secret "+secret.Name+" of the registration namespace", c.Get(s.ctx, client.ObjectKeyFromObject(&secret), &corev1.Secret{}))
		}
	})
}

// tokenSteps: a registering token writes nothing but its sealed status,
// and an expired one is refused.
func tokenSteps(s *tokenRegistration) {
	It("writes nothing for the registering token but the registration's sealed status", func() {
		regs := &fleet.ClusterRegistrationList{}
		Expect(s.admin.List(s.ctx, regs, client.InNamespace(fleet.DefaultWorkspace))).To(Succeed())
		var reg *fleet.ClusterRegistration
		for i := range regs.Items {
			if regs.Items[i].Spec.ClientID == s.prod.Cred.ClientID && regs.Items[i].Status.Granted {
				reg = &regs.Items[i]
			}
		}
		Expect(reg).NotTo(BeNil(), "prod's granted registration")
		Expect(reg.Status.SealedCredential).NotTo(BeEmpty())
		Expect(reg.Status.SealedCredential).NotTo(ContainSubstring(s.prod.Cred.Token), "only ciphertext")
		for _, list := range []client.ObjectList{&corev1.SecretList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}} {
			Expect(s.admin.List(s.ctx, list, client.InNamespace(fleet.DefaultSystemRegistrationNamespace),
				client.MatchingLabels{"fleet.cattle.io/registration": reg.Name})).To(Succeed())
			Expect(meta.LenList(list)).To(BeZero(), "%T for the grant in the registration namespace", list)
		}
	})

	It("refuses an expired token, and the agent says why", func() {
		const ns = "fleet-expired"
		j := e2e.NewJoinedCluster(e2e.JoinInput{Upstream: s.upstream, Downstream: s.downstreams[1], Admin: s.admin, LogDir: s.input.LogDir,
			SystemNamespace: ns, ConfigArgs: []string{"--client-id", "expired-cluster"}, AgentArgs: agentArgs})
		tokenYAML, err := framework.Run("fleet", "install", "agent-token", "-k", s.upstream.Kubeconfig, "--ttl", "2s", "--system-namespace", ns)
		Expect(err).NotTo(HaveOccurred())
		objs, err := framework.DecodeYAML(tokenYAML)
		Expect(err).NotTo(HaveOccurred())
		var tokenName string
		for _, o := range objs {
			if o.GetName() == fleet.AgentBootstrapSecretName {
				data, _, _ := unstructuredData(o.Object)
				tokenName = data[agentinstall.BootstrapTokenNameKey]
			}
		}
		Expect(tokenName).NotTo(BeEmpty())
		By("waiting for the manager to delete the expired token " + tokenName)
		Eventually(func() bool {
			err := s.admin.Get(s.ctx, types.NamespacedName{Namespace: fleet.DefaultWorkspace, Name: tokenName}, &fleet.ClusterRegistrationToken{})
			return apierrors.IsNotFound(err)
		}, 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		err = s.admin.Get(s.ctx, types.NamespacedName{Namespace: names.SystemRegistrationNamespace(fleet.DefaultSystemNamespace),
			Name: names.RegistrationTokenServiceAccount(fleet.DefaultWorkspace, tokenName)}, &corev1.ServiceAccount{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the token's ServiceAccount goes with it")

		Expect(framework.ApplyYAML(s.ctx, j.Local, tokenYAML)).To(Succeed())
		j.ApplyConfig(s.ctx)
		s.start(j)
		Eventually(j.Agent.Output, 30*time.Second, 200*time.Millisecond).Should(ContainSubstring("expired or was revoked"))
		Consistently(func() int {
			list := &fleet.ClusterList{}
			Expect(s.admin.List(s.ctx, list, client.MatchingFields{})).To(Succeed())
			n := 0
			for _, c := range list.Items {
				if c.Spec.ClientID == "expired-cluster" {
					n++
				}
			}
			return n
		}, 2*time.Second, 200*time.Millisecond).Should(BeZero())
		Expect(j.Agent.Exited()).To(BeFalse(), "the agent keeps retrying instead of crashing")
	})
}

// reRegisterSteps: a cluster re-registers onto the same Cluster, with a
// token issued for it or a generic one.
func reRegisterSteps(s *tokenRegistration) {
	It("re-registers the same cluster identity onto the same Cluster with a token issued for it, and revokes the old credential", func() {
		before := s.prod.Cluster.DeepCopy()
		oldCred := s.prod.Cred
		s.prod.Agent.Stop()

		// The cluster lost its credential: a fresh token issued for that
		// cluster brings it back (a token for any cluster may not: its agent
		// has checked in, and a clientID is no proof of being that cluster).
		Expect(s.prod.Local.Delete(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}})).To(Succeed())
		s.prod.ApplyToken(s.ctx, "--cluster", before.Name)
		s.start(s.prod)
		s.prod.WaitRegistered(s.ctx, registerTimeout)

		Expect(s.prod.Cluster.UID).To(Equal(before.UID), "same Cluster object")
		Expect(s.prod.Cluster.Labels).To(Equal(before.Labels))
		Expect(s.prod.Cred.Token).NotTo(Equal(oldCred.Token))
		Eventually(func() error {
			return agentupstream.Check(s.ctx, oldCred)
		}, 30*time.Second, 200*time.Millisecond).Should(MatchError(agentupstream.ErrRejected), "the old credential is revoked")
		Expect(agentupstream.Check(s.ctx, s.prod.Cred)).To(Succeed())
	})

	It("re-registers, while it runs, with a generic token placed beside its working credential, proving itself, as the same Cluster", func() {
		before := s.prod.Cluster.DeepCopy()
		oldCred := s.prod.Cred
		s.start(s.prod)
		e2e.WaitFor("the agent to check in", func(g Gomega) {
			g.Expect(s.prod.Agent.Output()).To(ContainSubstring("Agent running"))
		}, registerTimeout, 200*time.Millisecond)

		// A token for any cluster of the workspace: on its own it may not
		// take a Cluster whose agent has checked in; the running agent
		// proves with its credential that it is that Cluster's agent.
		s.prod.ApplyToken(s.ctx)
		e2e.WaitFor("the running agent to register with the new token", func(g Gomega) {
			cred, err := agentupstream.LoadStored(s.ctx, s.prod.Local, fleet.DefaultSystemNamespace)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cred.Token).NotTo(Equal(oldCred.Token), "agent log:\n%s", s.prod.Agent.Tail(4000))
			err = s.prod.Local.Get(s.ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentBootstrapSecretName}, &corev1.Secret{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the used bootstrap is forgotten: %v", err)
		}, registerTimeout, 200*time.Millisecond)
		s.prod.WaitRegistered(s.ctx, registerTimeout)
		Expect(s.prod.Cluster.UID).To(Equal(before.UID), "same Cluster object")
		Expect(s.prod.Agent.Output()).To(ContainSubstring("A new bootstrap secret was placed"))
		e2e.WaitFor("the old credential to be revoked", func(g Gomega) {
			g.Expect(agentupstream.Check(s.ctx, oldCred)).To(MatchError(agentupstream.ErrRejected))
		}, 30*time.Second, 200*time.Millisecond)
		Expect(agentupstream.Check(s.ctx, s.prod.Cred)).To(Succeed())
		e2e.WaitFor("the agent to check in with the new credential", func(g Gomega) {
			c := &fleet.Cluster{}
			g.Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(before), c)).To(Succeed())
			seen, err := checkin.LastOf(s.ctx, s.admin, c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(seen).To(BeTemporally(">", time.Now().Add(-10*time.Second)))
		}, 30*time.Second, 500*time.Millisecond)
	})
}

// manyClustersSteps: fifty clusters register at once.
func manyClustersSteps(s *tokenRegistration) {
	It("registers fifty clusters at once", func() {
		const n = 50
		local, err := s.downstreams[1].Client(kinds.Scheme())
		Expect(err).NotTo(HaveOccurred())
		tokenYAML, err := framework.Run("fleet", "install", "agent-token", "-k", s.upstream.Kubeconfig, "--system-namespace", "sim")
		Expect(err).NotTo(HaveOccurred())
		objs, err := framework.DecodeYAML(tokenYAML)
		Expect(err).NotTo(HaveOccurred())

		// Each simulated agent has its own system namespace downstream, with
		// its own bootstrap Secret and identity.
		for i := range n {
			ns := fmt.Sprintf("sim-%d", i)
			Expect(local.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
			for _, o := range objs {
				if o.GetKind() == "Secret" {
					o := o.DeepCopy()
					o.SetNamespace(ns)
					Expect(local.Create(s.ctx, o)).To(Succeed())
				}
			}
			Expect(local.Create(s.ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fleet.AgentName},
				Data:       map[string]string{agentinstall.ConfigKey: fmt.Sprintf("clientID: sim-%d\nlabels: {sim: %q}\n", i, fmt.Sprint(i))},
			})).To(Succeed())
		}
		start := time.Now()
		durations := make([]time.Duration, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer GinkgoRecover()
				cctx, cancel := context.WithTimeout(s.ctx, 2*time.Minute)
				defer cancel()
				_, errs[i] = agentjoin.Ensure(cctx, agentjoin.Options{
					Namespace: fmt.Sprintf("sim-%d", i), Local: local, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second,
				})
				durations[i] = time.Since(start)
			}()
		}
		wg.Wait()
		total := time.Since(start)
		for i, err := range errs {
			Expect(err).NotTo(HaveOccurred(), "agent %d", i)
		}
		sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
		msg := fmt.Sprintf("Registered %d clusters at once in %s (p50 %s, p99 %s)", n, total.Round(time.Millisecond),
			durations[n/2].Round(time.Millisecond), durations[n*99/100].Round(time.Millisecond))
		AddReportEntry("register-50", msg)
		GinkgoWriter.Println(msg)
		fmt.Println(msg)
		list := &fleet.ClusterList{}
		Expect(s.admin.List(s.ctx, list, client.InNamespace(fleet.DefaultWorkspace), client.HasLabels{"sim"})).To(Succeed())
		Expect(list.Items).To(HaveLen(n))
	})
}

func unstructuredData(obj map[string]interface{}) (map[string]string, bool, error) {
	out := map[string]string{}
	data, ok := obj["data"].(map[string]interface{})
	if !ok {
		return out, false, nil
	}
	for k, v := range data {
		s, _ := v.(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, true, err
		}
		out[k] = string(b)
	}
	return out, true, nil
}
