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

	"github.com/gitfleet/fleet/agent/registration"
	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// TokenRegistrationSpec registers downstream clusters with tokens, through
// the real CLI and agent, and checks what the credentials they get may do,
// that a grant leaves nothing for the registering token but its sealed
// status, that an expired token is refused, that a cluster re-registers onto
// the same Cluster, and that fifty clusters register at once. Call it in an
// Ordered container.
func TokenRegistrationSpec(ctx context.Context, inputGetter func() SpecInput) {
	var (
		input       SpecInput
		upstream    *controlplane.ControlPlane
		downstreams []*controlplane.ControlPlane
		admin       client.Client
		prod, other *e2e.JoinedCluster
	)
	BeforeAll(func() {
		input = inputGetter()
		input.validate("TokenRegistrationSpec")
		upstream, downstreams, admin = input.Upstream, input.Downstreams, input.Admin
	})

	// agentArgs are the flags of every agent here: quick check-ins and
	// retries.
	agentArgs := []string{"--checkin-interval", "2s", "--min-backoff", "100ms", "--max-backoff", "2s", "--bootstrap-check-interval", "500ms"}
	// start starts an agent for j that stops when the spec ends.
	start := func(j *e2e.JoinedCluster) {
		GinkgoHelper()
		j.StartAgent()
		DeferCleanup(j.Agent.Stop)
	}
	// join registers a downstream cluster exactly as a user would: print
	// the manifests with the CLI, apply them downstream, start the agent
	// from them.
	join := func(cp *controlplane.ControlPlane, systemNamespace string, configArgs ...string) *e2e.JoinedCluster {
		GinkgoHelper()
		j := e2e.NewJoinedCluster(e2e.JoinInput{Upstream: upstream, Downstream: cp, Admin: admin, LogDir: input.LogDir,
			SystemNamespace: systemNamespace, ConfigArgs: configArgs, AgentArgs: agentArgs})
		j.ApplyToken(ctx)
		j.ApplyConfig(ctx)
		start(j)
		return j
	}
	const registerTimeout = 60 * time.Second

	It("registers a cluster from the agent-token and agent-config manifests", func() {
		prod = join(downstreams[0], fleet.DefaultSystemNamespace, "-l", "env=prod", "-l", "fleet.cattle.io/evil=1")
		prod.WaitRegistered(ctx, registerTimeout)

		uid, err := downstreams[0].KubeSystemUID(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(prod.Cluster.Spec.ClientID).To(Equal(string(uid)), "the identity is the kube-system UID")
		Expect(prod.Cluster.Labels).To(HaveKeyWithValue("env", "prod"))
		Expect(prod.Cluster.Labels).NotTo(HaveKey("fleet.cattle.io/evil"), "agents may not set fleet's own labels")
		Expect(prod.Cluster.Name).To(Equal(names.ClusterForClientID(string(uid))))

		ns := &corev1.Namespace{}
		Expect(admin.Get(ctx, types.NamespacedName{Name: prod.Cred.ClusterNamespace}, ns)).To(Succeed())
		Expect(prod.Cred.ClusterNamespace).To(Equal(names.ClusterNamespace(fleet.DefaultWorkspace, prod.Cluster.Name)))

		err = prod.Local.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentBootstrapSecretName}, &corev1.Secret{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the cluster forgets the token: %v", err)

		// The check-in, a Lease the agent renews in its cluster namespace,
		// reaches the Cluster's status through the manager.
		Eventually(func(g Gomega) {
			c := &fleet.Cluster{}
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(prod.Cluster), c)).To(Succeed())
			g.Expect(c.Status.Agent.LastSeen.IsZero()).To(BeFalse(), "agent log:\n%s", prod.Agent.Output())
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("gives the credential exactly the agent's rights", func() {
		other = join(downstreams[1], fleet.DefaultSystemNamespace, "-l", "env=dev")
		other.WaitRegistered(ctx, registerTimeout)

		// Objects the agents will be tested against, made by an admin.
		content := &fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: "s-rights-test"}, Content: []byte("x")}
		Expect(admin.Create(ctx, content)).To(Succeed())
		bd := func(ns string) *fleet.BundleDeployment {
			b := &fleet.BundleDeployment{
				ObjectMeta: metav1.ObjectMeta{Name: "rights-test", Namespace: ns},
				Spec:       fleet.BundleDeploymentSpec{DeploymentID: "s-rights-test:1"},
			}
			Expect(admin.Create(ctx, b)).To(Succeed())
			return b
		}
		own, theirs := bd(prod.Cred.ClusterNamespace), bd(other.Cred.ClusterNamespace)
		secretIn := func(ns string) *corev1.Secret {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rights-test", Namespace: ns}, StringData: map[string]string{"k": "v"}}
			Expect(admin.Create(ctx, s)).To(Succeed())
			return s
		}
		ownSecret := secretIn(prod.Cred.ClusterNamespace)
		secretIn(other.Cred.ClusterNamespace)
		systemSecret := secretIn(fleet.DefaultSystemNamespace)

		c := prod.CredClient()

		By("allowed")
		list := &fleet.BundleDeploymentList{}
		Expect(c.List(ctx, list, client.InNamespace(prod.Cred.ClusterNamespace))).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
		w, err := c.Watch(ctx, &fleet.BundleDeploymentList{}, client.InNamespace(prod.Cred.ClusterNamespace))
		Expect(err).NotTo(HaveOccurred())
		w.Stop()
		patch := client.MergeFrom(own.DeepCopy())
		own.Status.AppliedDeploymentID = own.Spec.DeploymentID
		Expect(c.Status().Patch(ctx, own, patch)).To(Succeed())
		Expect(c.Get(ctx, client.ObjectKeyFromObject(ownSecret), &corev1.Secret{})).To(Succeed())
		Expect(c.Get(ctx, client.ObjectKeyFromObject(content), &fleet.Content{})).To(Succeed())
		// Its check-in Lease: read and renewed (the running agent made it).
		ownLease := &coordinationv1.Lease{}
		Expect(c.Get(ctx, types.NamespacedName{Namespace: prod.Cred.ClusterNamespace, Name: fleet.AgentLeaseName}, ownLease)).To(Succeed())
		now := metav1.NowMicro()
		Expect(registration.WriteLease(ctx, c, prod.Cred.ClusterNamespace, coordinationv1.LeaseSpec{RenewTime: &now}, nil)).To(Succeed())
		// The other agent's Lease and ServiceAccount, read as an admin.
		Eventually(func() error {
			return admin.Get(ctx, types.NamespacedName{Namespace: other.Cred.ClusterNamespace, Name: fleet.AgentLeaseName}, &coordinationv1.Lease{})
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "the other agent checked in")
		theirLease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: other.Cred.ClusterNamespace, Name: fleet.AgentLeaseName}}
		theirClaims, err := registration.ParseToken(other.Cred.Token)
		Expect(err).NotTo(HaveOccurred())
		ownClaims, err := registration.ParseToken(prod.Cred.Token)
		Expect(err).NotTo(HaveOccurred())
		Expect(ownClaims.Namespace).To(Equal(theirClaims.Namespace), "every agent's ServiceAccount lives in the agents' namespace")
		Expect(ownClaims.Namespace).NotTo(Equal(prod.Cred.ClusterNamespace))
		By("forbidden")
		forbidden := func(what string, err error) {
			GinkgoHelper()
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s must be forbidden, got: %v", what, err)
		}
		forbidden("listing another cluster's BundleDeployments",
			c.List(ctx, &fleet.BundleDeploymentList{}, client.InNamespace(other.Cred.ClusterNamespace)))
		forbidden("getting another cluster's BundleDeployment", c.Get(ctx, client.ObjectKeyFromObject(theirs), &fleet.BundleDeployment{}))
		spec := own.DeepCopy()
		spec.Spec.DeploymentID = "s-evil:1"
		forbidden("updating a BundleDeployment's spec", c.Update(ctx, spec))
		forbidden("creating a BundleDeployment", c.Create(ctx, &fleet.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "evil", Namespace: prod.Cred.ClusterNamespace}}))
		forbidden("patching another cluster's BundleDeployment status", c.Status().Patch(ctx, theirs.DeepCopy(),
			client.RawPatch(types.MergePatchType, []byte(`{"status":{"ready":true}}`))))
		forbidden("reading a Secret outside its namespace", c.Get(ctx, client.ObjectKeyFromObject(systemSecret), &corev1.Secret{}))
		forbidden("listing Secrets in its own namespace", c.List(ctx, &corev1.SecretList{}, client.InNamespace(prod.Cred.ClusterNamespace)))
		forbidden("patching another Cluster's status", c.Status().Patch(ctx, other.Cluster.DeepCopy(),
			client.RawPatch(types.MergePatchType, []byte(`{"status":{"agent":{"namespace":"x"}}}`))))
		forbidden("patching its own Cluster's status (the workspace namespace is out of reach)", c.Status().Patch(ctx, prod.Cluster.DeepCopy(),
			client.RawPatch(types.MergePatchType, []byte(`{"status":{"agent":{"namespace":"fleet-system"}}}`))))
		forbidden("reading another agent's Lease", c.Get(ctx, client.ObjectKeyFromObject(theirLease), &coordinationv1.Lease{}))
		forbidden("renewing another agent's Lease", registration.WriteLease(ctx, c, other.Cred.ClusterNamespace, coordinationv1.LeaseSpec{RenewTime: &now}, nil))
		forbidden("deleting another agent's Lease", c.Delete(ctx, theirLease.DeepCopy()))
		forbidden("deleting its own Lease", c.Delete(ctx, ownLease.DeepCopy()))
		forbidden("listing Leases in its own namespace", c.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace(prod.Cred.ClusterNamespace)))
		forbidden("reading another cluster's Secret", c.Get(ctx, types.NamespacedName{Namespace: other.Cred.ClusterNamespace, Name: "rights-test"}, &corev1.Secret{}))
		forbidden("creating a ServiceAccount in the agents' namespace", c.Create(ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Namespace: ownClaims.Namespace, Name: "evil-agent"}}))
		forbidden("creating a ServiceAccount in its own namespace", c.Create(ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Namespace: prod.Cred.ClusterNamespace, Name: "evil-agent"}}))
		forbidden("deleting another agent's ServiceAccount", c.Delete(ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Namespace: theirClaims.Namespace, Name: theirClaims.ServiceAccount}}))
		seconds := int64(3600)
		forbidden("requesting a token for another agent's ServiceAccount", c.SubResource("token").Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: theirClaims.Namespace, Name: theirClaims.ServiceAccount}},
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}))
		forbidden("requesting a token for its own ServiceAccount (the manager issues the next one)", c.SubResource("token").Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ownClaims.Namespace, Name: ownClaims.ServiceAccount}},
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}))
		forbidden("reading another cluster's next token", c.Get(ctx, types.NamespacedName{Namespace: other.Cred.ClusterNamespace,
			Name: fleet.RenewedCredentialSecretName}, &corev1.Secret{}))
		forbidden("getting a ClusterRegistration", c.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultWorkspace, Name: "any"}, &fleet.ClusterRegistration{}))
		forbidden("listing the agents' ServiceAccounts", c.List(ctx, &corev1.ServiceAccountList{}, client.InNamespace(ownClaims.Namespace)))
		forbidden("updating its own Cluster's spec", c.Patch(ctx, prod.Cluster.DeepCopy(),
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"env":"hacked"}}}`))))
		forbidden("listing Clusters", c.List(ctx, &fleet.ClusterList{}, client.InNamespace(fleet.DefaultWorkspace)))
		forbidden("listing Contents", c.List(ctx, &fleet.ContentList{}))
		forbidden("creating ClusterRegistrations", c.Create(ctx, &fleet.ClusterRegistration{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "evil-", Namespace: fleet.DefaultWorkspace},
			Spec:       fleet.ClusterRegistrationSpec{ClientID: "x", ClientRandom: "0123456789abcdef0123"}}))
		// What earlier versions handed credentials over in.
		pending := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rights-test", Namespace: fleet.DefaultSystemRegistrationNamespace},
			Type: fleet.CredentialSecretType, StringData: map[string]string{"token": "x"}}
		Expect(admin.Create(ctx, pending)).To(Succeed())
		creds := &corev1.SecretList{}
		Expect(admin.List(ctx, creds, client.InNamespace(fleet.DefaultSystemRegistrationNamespace))).To(Succeed())
		for _, s := range creds.Items {
			forbidden("reading secret "+s.Name+" of the registration namespace", c.Get(ctx, client.ObjectKeyFromObject(&s), &corev1.Secret{}))
		}
	})

	It("writes nothing for the registering token but the registration's sealed status", func() {
		regs := &fleet.ClusterRegistrationList{}
		Expect(admin.List(ctx, regs, client.InNamespace(fleet.DefaultWorkspace))).To(Succeed())
		var reg *fleet.ClusterRegistration
		for i := range regs.Items {
			if regs.Items[i].Spec.ClientID == prod.Cred.ClientID && regs.Items[i].Status.Granted {
				reg = &regs.Items[i]
			}
		}
		Expect(reg).NotTo(BeNil(), "prod's granted registration")
		Expect(reg.Status.SealedCredential).NotTo(BeEmpty())
		Expect(reg.Status.SealedCredential).NotTo(ContainSubstring(prod.Cred.Token), "only ciphertext")
		for _, list := range []client.ObjectList{&corev1.SecretList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}} {
			Expect(admin.List(ctx, list, client.InNamespace(fleet.DefaultSystemRegistrationNamespace),
				client.MatchingLabels{"fleet.cattle.io/registration": reg.Name})).To(Succeed())
			Expect(meta.LenList(list)).To(BeZero(), "%T for the grant in the registration namespace", list)
		}
	})

	It("refuses an expired token, and the agent says why", func() {
		const ns = "fleet-expired"
		j := e2e.NewJoinedCluster(e2e.JoinInput{Upstream: upstream, Downstream: downstreams[1], Admin: admin, LogDir: input.LogDir,
			SystemNamespace: ns, ConfigArgs: []string{"--client-id", "expired-cluster"}, AgentArgs: agentArgs})
		tokenYAML, err := framework.Run("fleet", "install", "agent-token", "-k", upstream.Kubeconfig, "--ttl", "2s", "--system-namespace", ns)
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
			err := admin.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultWorkspace, Name: tokenName}, &fleet.ClusterRegistrationToken{})
			return apierrors.IsNotFound(err)
		}, 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		err = admin.Get(ctx, types.NamespacedName{Namespace: names.SystemRegistrationNamespace(fleet.DefaultSystemNamespace),
			Name: names.RegistrationTokenServiceAccount(fleet.DefaultWorkspace, tokenName)}, &corev1.ServiceAccount{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the token's ServiceAccount goes with it")

		Expect(framework.ApplyYAML(ctx, j.Local, tokenYAML)).To(Succeed())
		j.ApplyConfig(ctx)
		start(j)
		Eventually(j.Agent.Output, 30*time.Second, 200*time.Millisecond).Should(ContainSubstring("expired or was revoked"))
		Consistently(func() int {
			list := &fleet.ClusterList{}
			Expect(admin.List(ctx, list, client.MatchingFields{})).To(Succeed())
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

	It("re-registers the same cluster identity onto the same Cluster with a token issued for it, and revokes the old credential", func() {
		before := prod.Cluster.DeepCopy()
		oldCred := prod.Cred
		prod.Agent.Stop()

		// The cluster lost its credential: a fresh token issued for that
		// cluster brings it back (a token for any cluster may not: its agent
		// has checked in, and a clientID is no proof of being that cluster).
		Expect(prod.Local.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}})).To(Succeed())
		prod.ApplyToken(ctx, "--cluster", before.Name)
		start(prod)
		prod.WaitRegistered(ctx, registerTimeout)

		Expect(prod.Cluster.UID).To(Equal(before.UID), "same Cluster object")
		Expect(prod.Cluster.Labels).To(Equal(before.Labels))
		Expect(prod.Cred.Token).NotTo(Equal(oldCred.Token))
		Eventually(func() error {
			return registration.Check(ctx, oldCred)
		}, 30*time.Second, 200*time.Millisecond).Should(MatchError(registration.ErrRejected), "the old credential is revoked")
		Expect(registration.Check(ctx, prod.Cred)).To(Succeed())
	})

	It("re-registers, while it runs, with a generic token placed beside its working credential, proving itself, as the same Cluster", func() {
		before := prod.Cluster.DeepCopy()
		oldCred := prod.Cred
		start(prod)
		e2e.WaitFor("the agent to check in", func(g Gomega) {
			g.Expect(prod.Agent.Output()).To(ContainSubstring("Agent running"))
		}, registerTimeout, 200*time.Millisecond)

		// A token for any cluster of the workspace: on its own it may not
		// take a Cluster whose agent has checked in; the running agent
		// proves with its credential that it is that Cluster's agent.
		prod.ApplyToken(ctx)
		e2e.WaitFor("the running agent to register with the new token", func(g Gomega) {
			cred, err := registration.LoadStored(ctx, prod.Local, fleet.DefaultSystemNamespace)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cred.Token).NotTo(Equal(oldCred.Token), "agent log:\n%s", prod.Agent.Tail(4000))
			err = prod.Local.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentBootstrapSecretName}, &corev1.Secret{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the used bootstrap is forgotten: %v", err)
		}, registerTimeout, 200*time.Millisecond)
		prod.WaitRegistered(ctx, registerTimeout)
		Expect(prod.Cluster.UID).To(Equal(before.UID), "same Cluster object")
		Expect(prod.Agent.Output()).To(ContainSubstring("A new bootstrap secret was placed"))
		e2e.WaitFor("the old credential to be revoked", func(g Gomega) {
			g.Expect(registration.Check(ctx, oldCred)).To(MatchError(registration.ErrRejected))
		}, 30*time.Second, 200*time.Millisecond)
		Expect(registration.Check(ctx, prod.Cred)).To(Succeed())
		e2e.WaitFor("the agent to check in with the new credential", func(g Gomega) {
			c := &fleet.Cluster{}
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(before), c)).To(Succeed())
			seen, err := checkin.LastOf(ctx, admin, c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(seen).To(BeTemporally(">", time.Now().Add(-10*time.Second)))
		}, 30*time.Second, 500*time.Millisecond)
	})

	It("registers fifty clusters at once", func() {
		const n = 50
		local, err := downstreams[1].Client(registration.Scheme())
		Expect(err).NotTo(HaveOccurred())
		tokenYAML, err := framework.Run("fleet", "install", "agent-token", "-k", upstream.Kubeconfig, "--system-namespace", "sim")
		Expect(err).NotTo(HaveOccurred())
		objs, err := framework.DecodeYAML(tokenYAML)
		Expect(err).NotTo(HaveOccurred())

		// Each simulated agent has its own system namespace downstream, with
		// its own bootstrap Secret and identity.
		for i := range n {
			ns := fmt.Sprintf("sim-%d", i)
			Expect(local.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
			for _, o := range objs {
				if o.GetKind() == "Secret" {
					o := o.DeepCopy()
					o.SetNamespace(ns)
					Expect(local.Create(ctx, o)).To(Succeed())
				}
			}
			Expect(local.Create(ctx, &corev1.ConfigMap{
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
				cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				defer cancel()
				_, errs[i] = registration.Ensure(cctx, registration.Options{
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
		Expect(admin.List(ctx, list, client.InNamespace(fleet.DefaultWorkspace), client.HasLabels{"sim"})).To(Succeed())
		Expect(list.Items).To(HaveLen(n))
	})
}

func decodeB64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

func unstructuredData(obj map[string]interface{}) (map[string]string, bool, error) {
	out := map[string]string{}
	data, ok := obj["data"].(map[string]interface{})
	if !ok {
		return out, false, nil
	}
	for k, v := range data {
		s, _ := v.(string)
		b, err := decodeB64(s)
		if err != nil {
			return nil, true, err
		}
		out[k] = string(b)
	}
	return out, true, nil
}
