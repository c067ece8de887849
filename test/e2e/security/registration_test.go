package security_test

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/join"
	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/upstream"
	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/names"
	internalregistration "github.com/gitfleet/fleet/internal/registration"
	"github.com/gitfleet/fleet/test/framework"
)

// tokenHolder is foothold (a): the bearer of one registration token, with
// exactly the token's rights.
type tokenHolder struct {
	boot *agentinstall.Bootstrap
	c    client.Client
	// keys are the keys of the holder's requests, by name: the credential
	// of each is sealed to its key.
	keys map[string]*ecdh.PrivateKey
}

// issueToken has an admin issue a registration token for workspace (bound
// to cluster when set) and returns its holder.
func issueToken(ctx context.Context, workspace, cluster string) (*fleet.ClusterRegistrationToken, *tokenHolder) {
	token, boot, err := agentinstall.CreateToken(ctx, env.Admin, agentinstall.TokenOptions{Namespace: workspace, Cluster: cluster})
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(framework.BearerConfig(env.Upstream.Config, boot.Token), client.Options{Scheme: controllers.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return token, &tokenHolder{boot: boot, c: c, keys: map[string]*ecdh.PrivateKey{}}
}

// request creates a ClusterRegistration as an agent does, named name ("" for
// the agent's own naming), proving that it holds its token.
func (h *tokenHolder) request(ctx context.Context, name, clientID string) *fleet.ClusterRegistration {
	return h.requestNaming(ctx, name, clientID, h.boot.TokenName)
}

// requestNaming is request with the token label set to token, which may be
// another token than the holder's: the proof is made with the only token
// value the holder has, its own.
func (h *tokenHolder) requestNaming(ctx context.Context, name, clientID, token string) *fleet.ClusterRegistration {
	random := make([]byte, 16)
	_, _ = rand.Read(random)
	clientRandom := hex.EncodeToString(random)
	if name == "" {
		name = join.RequestName(clientID, clientRandom)
	}
	key, err := internalregistration.NewKey()
	Expect(err).NotTo(HaveOccurred())
	reg := &fleet.ClusterRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.boot.ClusterNamespace,
			Labels: map[string]string{fleet.RegistrationTokenLabel: token}},
		Spec: fleet.ClusterRegistrationSpec{ClientID: clientID, ClientRandom: clientRandom, PublicKey: internalregistration.EncodePublicKey(key)},
	}
	internalregistration.Prove(h.boot.Token, reg)
	Expect(h.c.Create(ctx, reg)).To(Succeed())
	h.keys[reg.Name] = key
	return reg
}

// fetch waits for the credential of reg, reading the registration with the
// token's right to get it, and opens it with the request's key, as an agent
// does.
func (h *tokenHolder) fetch(ctx context.Context, reg *fleet.ClusterRegistration) *upstream.Credential {
	got := &fleet.ClusterRegistration{}
	Eventually(func(g Gomega) {
		g.Expect(h.c.Get(ctx, client.ObjectKeyFromObject(reg), got)).To(Succeed())
		g.Expect(got.Status.SealedCredential).NotTo(BeEmpty(), "not granted yet")
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	sealed, err := internalregistration.Open(h.keys[reg.Name], reg.Namespace, reg.Name, got.Status.SealedCredential)
	Expect(err).NotTo(HaveOccurred())
	return &upstream.Credential{
		APIServerURL: env.Upstream.Config.Host, APIServerCA: env.Upstream.Config.CAData,
		Token: sealed.Token, ClusterName: sealed.ClusterName, ClusterNamespace: sealed.ClusterNamespace,
		Namespace: sealed.Namespace, ClientID: reg.Spec.ClientID,
	}
}

// checkIn renews the agent's check-in Lease with its own credential, as
// the agent's heartbeat does.
func checkIn(ctx context.Context, cred *upstream.Credential) {
	c, err := upstream.NewClient(cred.RESTConfig())
	Expect(err).NotTo(HaveOccurred())
	now := metav1.NowMicro()
	Expect(checkin.Write(ctx, c, cred.ClusterNamespace, coordinationv1.LeaseSpec{RenewTime: &now}, nil)).To(Succeed())
}

// checkedInVictim registers an agent of clientID in ws with a generic token,
// has it check in, and waits until its Cluster shows the check-in: a
// cluster an attacker may try to take over.
func checkedInVictim(ctx context.Context, ws, clientID string) (*fleet.ClusterRegistration, *upstream.Credential, *fleet.Cluster) {
	GinkgoHelper()
	_, owner := issueToken(ctx, ws, "")
	reg := owner.request(ctx, "", clientID)
	cred := owner.fetch(ctx, reg)
	checkIn(ctx, cred)
	Expect(upstream.Check(ctx, cred)).To(Succeed())
	cluster := &fleet.Cluster{}
	Eventually(func(g Gomega) {
		g.Expect(env.Admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: cred.ClusterName}, cluster)).To(Succeed())
		g.Expect(cluster.Status.Agent.LastSeen.IsZero()).To(BeFalse(), "the manager folds the first check-in into the Cluster")
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	return reg, cred, cluster
}

// accepted is condition Accepted of a registration, read by the admin.
func accepted(ctx context.Context, reg *fleet.ClusterRegistration) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		got := &fleet.ClusterRegistration{}
		g.Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(reg), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, fleet.ConditionAccepted)
		g.Expect(c).NotTo(BeNil(), "no Accepted condition yet")
		return c
	}
}

// workspace makes a workspace namespace for one spec.
func workspace(ctx context.Context, name string) string {
	err := env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	return name
}

var _ = Describe("Registration", func() {
	nameSquattingSpecs()
	takeoverSpecs()
	floodAndSnoopingSpecs()
	adoptionAndRevocationSpecs()
})

// nameSquattingSpecs: hole 5, a registration named after an existing
// RoleBinding.
func nameSquattingSpecs() {
	It("5: a registration named after an existing RoleBinding does not replace it", func(ctx SpecContext) {
		victim := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultWorkspace, Name: "ops-admins"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
		}
		Expect(env.Admin.Create(ctx, victim)).To(Succeed())
		_, attacker := issueToken(ctx, fleet.DefaultWorkspace, "")

		reg := attacker.request(ctx, victim.Name, "sec-reg-5-attacker")
		Eventually(accepted(ctx, reg), 30*time.Second, 200*time.Millisecond).Should(
			HaveField("Reason", fleet.ReasonGranted), "a legitimate new cluster is still granted")

		after := &rbacv1.RoleBinding{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(victim), after)).To(Succeed())
		Expect(after.UID).To(Equal(victim.UID), "not deleted and made again")
		Expect(after.ResourceVersion).To(Equal(victim.ResourceVersion), "not rewritten")
		Expect(after.RoleRef).To(Equal(victim.RoleRef))
		Expect(after.Subjects).To(Equal(victim.Subjects))
		Expect(after.Labels).NotTo(HaveKey(fleet.ManagedLabel))
	})
}

// takeoverSpecs: hole 6, a generic token holder taking over a cluster, and
// the cluster's own agent registering again.
func takeoverSpecs() {
	It("6: a generic token holder cannot re-register as a cluster whose agent has checked in", func(ctx SpecContext) {
		ws := workspace(ctx, "sec-reg-takeover")
		victimReg, victimCred, before := checkedInVictim(ctx, ws, "sec-reg-6-victim")

		// The clientID is no secret: it is in the Cluster's spec.
		_, attacker := issueToken(ctx, ws, "")
		reg := attacker.request(ctx, "", before.Spec.ClientID)
		Eventually(accepted(ctx, reg), 30*time.Second, 200*time.Millisecond).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", fleet.ReasonIdentityConflict),
			HaveField("Message", ContainSubstring("fleet install agent-token -g %s --cluster %s", ws, before.Name))))

		Consistently(func() error { return upstream.Check(ctx, victimCred) }, 3*time.Second, 300*time.Millisecond).
			Should(Succeed(), "the real agent's credential still works")
		refused := &fleet.ClusterRegistration{}
		Expect(attacker.c.Get(ctx, client.ObjectKeyFromObject(reg), refused)).To(Succeed())
		Expect(refused.Status.SealedCredential).To(BeEmpty(), "no credential for the attacker")
		after := &fleet.Cluster{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(before), after)).To(Succeed())
		Expect(after.UID).To(Equal(before.UID))
		Expect(after.Spec).To(Equal(before.Spec))
		Expect(after.Labels).To(Equal(before.Labels))
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(victimReg), &fleet.ClusterRegistration{})).To(Succeed(),
			"the victim's registration, whose deletion would revoke its credential, is still there")

		// The recovery the message names: a token issued for that cluster.
		_, admin := issueToken(ctx, ws, before.Name)
		recovered := admin.fetch(ctx, admin.request(ctx, "", before.Spec.ClientID))
		Expect(recovered.ClusterName).To(Equal(before.Name))
		Expect(upstream.Check(ctx, recovered)).To(Succeed())
	})

	It("6: a generic token holder cannot name a token bound to a cluster to take that cluster over", func(ctx SpecContext) {
		ws := workspace(ctx, "sec-reg-spoof")
		_, victimCred, _ := checkedInVictim(ctx, ws, "sec-reg-6-spoof-victim")
		// An admin issues a recovery token for the victim: its name is no
		// secret (import tokens are named after their cluster).
		bound, _ := issueToken(ctx, ws, victimCred.ClusterName)

		// The attacker holds a generic token of the same workspace, whose
		// Role lets it create registrations with any labels.
		_, attacker := issueToken(ctx, ws, "")
		spoofed := attacker.requestNaming(ctx, "", victimCred.ClientID, bound.Name)
		Eventually(accepted(ctx, spoofed), 30*time.Second, 200*time.Millisecond).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", fleet.ReasonTokenNotProven),
			HaveField("Message", ContainSubstring("does not prove it was made with registration token %s", bound.Name))))
		// Without any proof, the same.
		bare := attacker.requestNaming(ctx, "", victimCred.ClientID, bound.Name)
		Expect(attacker.c.Get(ctx, client.ObjectKeyFromObject(bare), bare)).To(Succeed())
		base := bare.DeepCopy()
		delete(bare.Annotations, fleet.RegistrationProofAnnotation)
		Expect(apierrors.IsForbidden(attacker.c.Patch(ctx, bare, client.MergeFrom(base)))).To(BeTrue(), "a token may not change a request")
		unproven := &fleet.ClusterRegistration{
			ObjectMeta: metav1.ObjectMeta{Name: "request-unproven-sec-reg-6", Namespace: ws,
				Labels: map[string]string{fleet.RegistrationTokenLabel: bound.Name}},
			Spec: fleet.ClusterRegistrationSpec{ClientID: victimCred.ClientID, ClientRandom: "0123456789abcdef0123", PublicKey: spoofed.Spec.PublicKey},
		}
		Expect(attacker.c.Create(ctx, unproven)).To(Succeed())
		Eventually(accepted(ctx, unproven), 30*time.Second, 200*time.Millisecond).Should(HaveField("Reason", fleet.ReasonTokenNotProven))

		Consistently(func() error { return upstream.Check(ctx, victimCred) }, 3*time.Second, 300*time.Millisecond).
			Should(Succeed(), "the real agent's credential still works")
		for _, reg := range []*fleet.ClusterRegistration{spoofed, unproven} {
			got := &fleet.ClusterRegistration{}
			Expect(attacker.c.Get(ctx, client.ObjectKeyFromObject(reg), got)).To(Succeed())
			Expect(got.Status.SealedCredential).To(BeEmpty(), "no credential for the attacker")
		}
	})

	It("6: the cluster's own agent, holding a working credential, registers again with a generic token as the same Cluster", func(ctx SpecContext) {
		ws := workspace(ctx, "sec-reg-renewal")
		// The agent's own cluster, where its bootstrap and credential live.
		local, err := env.Downstreams[1].Client(kinds.Scheme())
		Expect(err).NotTo(HaveOccurred())
		const agentNS = "sec-renewal-agent"
		place := func(boot *agentinstall.Bootstrap) {
			objs, err := agentinstall.Objects(agentinstall.Options{Namespace: agentNS, NoDeployment: true,
				Config: &agentinstall.AgentConfig{ClientID: "sec-reg-6-renewal"}, Bootstrap: boot})
			Expect(err).NotTo(HaveOccurred())
			Expect(agentinstall.Apply(ctx, local, objs)).To(Succeed())
		}
		ensure := func() *upstream.Credential {
			cred, err := join.Ensure(ctx, join.Options{Namespace: agentNS, Local: local,
				MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
			Expect(err).NotTo(HaveOccurred())
			return cred
		}
		_, first := issueToken(ctx, ws, "")
		place(first.boot)
		old := ensure()
		checkIn(ctx, old)

		// A newer generic token placed beside the working credential (an
		// admin renewing the cluster's registration). Alone it could not
		// take a checked-in Cluster (the spec above); with the agent's
		// proof, written with its credential, it can.
		_, second := issueToken(ctx, ws, "")
		place(second.boot)
		renewed := ensure()
		Expect(renewed.ClusterName).To(Equal(old.ClusterName), "the same Cluster")
		Expect(renewed.Token).NotTo(Equal(old.Token))
		Expect(upstream.Check(ctx, renewed)).To(Succeed())
		err = local.Get(ctx, types.NamespacedName{Namespace: agentNS, Name: fleet.AgentBootstrapSecretName}, &corev1.Secret{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the used bootstrap is forgotten: %v", err)
		Eventually(func() error { return upstream.Check(ctx, old) }, 30*time.Second, 250*time.Millisecond).
			Should(MatchError(upstream.ErrRejected), "the old credential is revoked once the new one is granted")
		clusters := &fleet.ClusterList{}
		Expect(env.Admin.List(ctx, clusters, client.InNamespace(ws))).To(Succeed())
		Expect(clusters.Items).To(HaveLen(1), "no second Cluster")
	})
}

// floodAndSnoopingSpecs: holes 8 and 12, one token's flood, and another
// agent's registration.
func floodAndSnoopingSpecs() {
	It("8: one token's flood of registrations does not hold back another token's", func(ctx SpecContext) {
		ws := workspace(ctx, "sec-reg-flood")
		_, floodA := issueToken(ctx, ws, "")
		for i := range 20 {
			floodA.request(ctx, "", fmt.Sprintf("sec-reg-8-junk-%d", i))
		}
		_, honest := issueToken(ctx, ws, "")
		start := time.Now()
		cred := honest.fetch(ctx, honest.request(ctx, "", "sec-reg-8-honest"))
		Expect(time.Since(start)).To(BeNumerically("<", 15*time.Second), "granted promptly")
		Expect(upstream.Check(ctx, cred)).To(Succeed())
	})

	It("12: a registration token holder gets nothing usable from another agent's registration, and cannot find one", func(ctx SpecContext) {
		ws := workspace(ctx, "sec-reg-sealed")
		// The same token as the victim's: a token is often shared by many
		// clusters.
		_, holder := issueToken(ctx, ws, "")
		victimReg := holder.request(ctx, "", "sec-reg-12-victim")
		victimCred := holder.fetch(ctx, victimReg)
		Expect(upstream.Check(ctx, victimCred)).To(Succeed())

		// The attacker holds the same token, and even knows the victim's
		// registration name.
		attacker, err := client.NewWithWatch(framework.BearerConfig(env.Upstream.Config, holder.boot.Token), client.Options{Scheme: controllers.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		stolen := &fleet.ClusterRegistration{}
		Expect(attacker.Get(ctx, client.ObjectKeyFromObject(victimReg), stolen)).To(Succeed(), "get by name is the token's right")
		Expect(stolen.Status.SealedCredential).NotTo(BeEmpty())
		Expect(stolen.Status.SealedCredential).NotTo(ContainSubstring(victimCred.Token), "only ciphertext")
		ownKey, err := internalregistration.NewKey()
		Expect(err).NotTo(HaveOccurred())
		_, err = internalregistration.Open(ownKey, victimReg.Namespace, victimReg.Name, stolen.Status.SealedCredential)
		Expect(err).To(MatchError(ContainSubstring("not sealed for this request")), "the attacker's key opens nothing")

		// Replaying the victim's public key in a request of its own: the
		// grant is sealed to a key the attacker does not hold.
		replay := &fleet.ClusterRegistration{
			ObjectMeta: metav1.ObjectMeta{Name: "request-replay-sec-reg-12", Namespace: ws,
				Labels: map[string]string{fleet.RegistrationTokenLabel: holder.boot.TokenName}},
			Spec: fleet.ClusterRegistrationSpec{ClientID: "sec-reg-12-replay", ClientRandom: "0123456789abcdef0123", PublicKey: victimReg.Spec.PublicKey},
		}
		internalregistration.Prove(holder.boot.Token, replay)
		Expect(attacker.Create(ctx, replay)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(attacker.Get(ctx, client.ObjectKeyFromObject(replay), replay)).To(Succeed())
			g.Expect(replay.Status.SealedCredential).NotTo(BeEmpty())
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		_, err = internalregistration.Open(ownKey, replay.Namespace, replay.Name, replay.Status.SealedCredential)
		Expect(err).To(HaveOccurred(), "sealed to the replayed key, which the attacker lacks")

		By("the token may not list, watch, change or delete registrations")
		err = attacker.List(ctx, &fleet.ClusterRegistrationList{}, client.InNamespace(ws))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "list: %v", err)
		_, err = attacker.Watch(ctx, &fleet.ClusterRegistrationList{}, client.InNamespace(ws))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "watch: %v", err)
		err = attacker.List(ctx, &fleet.ClusterRegistrationList{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "list in all namespaces: %v", err)
		patch := client.MergeFrom(stolen.DeepCopy())
		stolen.Spec.PublicKey = internalregistration.EncodePublicKey(ownKey)
		Expect(apierrors.IsForbidden(attacker.Patch(ctx, stolen, patch))).To(BeTrue(), "patch the victim's request")
		err = attacker.Status().Patch(ctx, stolen, client.RawPatch(types.MergePatchType, []byte(`{"status":{"sealedCredential":""}}`)))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "patch the victim's grant: %v", err)
		Expect(apierrors.IsForbidden(attacker.Delete(ctx, victimReg.DeepCopy()))).To(BeTrue(), "delete the victim's registration")
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(victimReg), &fleet.ClusterRegistration{})).To(Succeed())
		Expect(upstream.Check(ctx, victimCred)).To(Succeed(), "the victim's credential still works")
	})
}

// adoptionAndRevocationSpecs: holes 9, 10 and 11, adopting a namespace or a
// ServiceAccount, and revoking a deleted Cluster's credential.
func adoptionAndRevocationSpecs() {
	It("9: a registration does not adopt an existing namespace, labelled for another Cluster or not labelled at all", func(ctx SpecContext) {
		ws := workspace(ctx, "sec-reg-ns")
		_, attacker := issueToken(ctx, ws, "")
		for _, tc := range []struct {
			clientID string
			labels   map[string]string
		}{
			{"sec-reg-9-other", map[string]string{fleet.ManagedLabel: "true", fleet.ClusterLabel: "someone-else", fleet.ClusterNamespaceLabel: ws}},
			{"sec-reg-9-unlabelled", nil},
		} {
			nsName := names.ClusterNamespace(ws, names.ClusterForClientID(tc.clientID))
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName, Labels: tc.labels}}
			Expect(env.Admin.Create(ctx, ns)).To(Succeed())

			reg := attacker.request(ctx, "", tc.clientID)
			Eventually(accepted(ctx, reg), 30*time.Second, 200*time.Millisecond).Should(And(
				HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", fleet.ReasonNamespaceConflict),
				HaveField("Message", ContainSubstring(nsName))))

			after := &corev1.Namespace{}
			Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(ns), after)).To(Succeed())
			Expect(after.ResourceVersion).To(Equal(ns.ResourceVersion), "the namespace is not relabelled")
			sas := &corev1.ServiceAccountList{}
			Expect(env.Admin.List(ctx, sas, client.InNamespace(nsName), client.HasLabels{fleet.ManagedLabel})).To(Succeed())
			Expect(sas.Items).To(BeEmpty(), "no agent ServiceAccount was made in it")
			err := env.Admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: names.ClusterForClientID(tc.clientID)}, &fleet.Cluster{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Cluster was made: %v", err)
		}

		// A tenant's Cluster whose namespace name is taken is refused too.
		const tenantNS = "sec-reg-ns-tenant"
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), tenantNS)
		Expect(err).NotTo(HaveOccurred())
		taken := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterNamespace(tenantNS, "c2")}}
		Expect(env.Admin.Create(ctx, taken)).To(Succeed())
		cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "c2"}}
		Expect(tenant.Create(ctx, cluster)).To(Succeed())
		Eventually(func(g Gomega) {
			got := &fleet.Cluster{}
			g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(cluster), got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, fleet.ConditionProcessed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(fleet.ReasonNamespaceConflict))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		after := &corev1.Namespace{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(taken), after)).To(Succeed())
		Expect(after.ResourceVersion).To(Equal(taken.ResourceVersion), "the namespace is not relabelled")
	})

	It("10: a token named after an existing ServiceAccount is issued for a ServiceAccount of its own, and leaves that one alone", func(ctx SpecContext) {
		const ns = "sec-reg-sa"
		workspace(ctx, ns)
		// A tenant that may create (and read) registration tokens here, and
		// nothing else.
		maker := metav1.ObjectMeta{Namespace: ns, Name: "token-maker"}
		Expect(env.Admin.Create(ctx, &rbacv1.Role{ObjectMeta: maker, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{fleet.GroupVersion.Group}, Resources: []string{"clusterregistrationtokens"}, Verbs: []string{"create", "get"}}}})).To(Succeed())
		Expect(env.Admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: maker,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: maker.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: maker.Name}}})).To(Succeed())
		tenant, _, err := framework.ServiceAccountClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns, maker.Name)
		Expect(err).NotTo(HaveOccurred())
		ciBot := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ci-bot"}}
		Expect(env.Admin.Create(ctx, ciBot)).To(Succeed())

		// With a TTL, the manager itself deletes the token when it expires.
		token := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ciBot.Name},
			Spec: fleet.ClusterRegistrationTokenSpec{TTL: &metav1.Duration{Duration: 15 * time.Second}}}
		Expect(tenant.Create(ctx, token)).To(Succeed())
		// The token is issued, for a ServiceAccount of its own in the
		// registration namespace: its name is no way to reach ci-bot.
		var values *agentinstall.Bootstrap
		Eventually(func(g Gomega) {
			got := &fleet.ClusterRegistrationToken{}
			g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(token), got)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleet.ConditionIssued)).To(BeTrue())
			g.Expect(got.Status.SecretName).NotTo(BeEmpty())
			secret := &corev1.Secret{}
			g.Expect(env.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: got.Status.SecretName}, secret)).To(Succeed())
			var err error
			values, err = agentinstall.TokenValues(secret)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(values.Token).NotTo(BeEmpty())
		}, 10*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(whoAmI(values.Token)).To(Equal("system:serviceaccount:" + names.SystemRegistrationNamespace(fleet.DefaultSystemNamespace) +
			":" + names.RegistrationTokenServiceAccount(ns, ciBot.Name)))

		Eventually(func() bool {
			return apierrors.IsNotFound(env.Admin.Get(ctx, client.ObjectKeyFromObject(token), &fleet.ClusterRegistrationToken{}))
		}, 40*time.Second, 250*time.Millisecond).Should(BeTrue(), "the expired token is deleted")
		after := &corev1.ServiceAccount{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(ciBot), after)).To(Succeed(), "ci-bot outlives the token")
		Expect(after.UID).To(Equal(ciBot.UID))
		Expect(after.ResourceVersion).To(Equal(ciBot.ResourceVersion), "not adopted: no labels or owner added")
	})

	It("11: deleting a Cluster revokes its agent's credential, Contents included, though the agent's ServiceAccount lives outside the cluster namespace", func(ctx SpecContext) {
		ws := workspace(ctx, "sec-reg-delete")
		_, holder := issueToken(ctx, ws, "")
		reg := holder.request(ctx, "", "sec-reg-11")
		cred := holder.fetch(ctx, reg)
		content := &fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: "s-sec-reg-11"}, Content: []byte("x")}
		Expect(env.Admin.Create(ctx, content)).To(Succeed())
		agent, err := upstream.NewClient(cred.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		Expect(agent.Get(ctx, client.ObjectKeyFromObject(content), &fleet.Content{})).To(Succeed(), "the agent reads Contents")
		Expect(upstream.Check(ctx, cred)).To(Succeed())

		Expect(env.Admin.Delete(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: cred.ClusterName}})).To(Succeed())
		Eventually(func() bool {
			err := agent.Get(ctx, client.ObjectKeyFromObject(content), &fleet.Content{})
			return apierrors.IsUnauthorized(err)
		}, 30*time.Second, 200*time.Millisecond).Should(BeTrue(), "the credential no longer authenticates: its ServiceAccount is gone")
		Expect(upstream.Check(ctx, cred)).To(MatchError(upstream.ErrRejected))
	})
}
