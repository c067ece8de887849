package security_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/join"
	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/test/framework"
)

// applyRegistration applies a registration token and an agent config with a
// clientID of its own to systemNamespace of cp, as a user would with the
// CLI's manifests; the clientID keeps this spec's Cluster apart from those
// of other specs registering the same downstream.
func applyRegistration(local client.Client, systemNamespace, clientID string) {
	tokenYAML, err := framework.Run("fleet", "install", "agent-token", "-k", env.Upstream.Kubeconfig, "--system-namespace", systemNamespace)
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.ApplyYAML(env.Ctx, local, tokenYAML)).To(Succeed())
	configYAML, err := framework.Run("fleet", "install", "agent-config", "--system-namespace", systemNamespace, "--client-id", clientID)
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.ApplyYAML(env.Ctx, local, configYAML)).To(Succeed())
}

var _ = Describe("Credential rotation", func() {
	It("7. rotates agent credentials before they expire without a gap, and a leaked credential lives at most one lifetime", func() {
		ctx := env.Ctx
		const agentNS, victimNS = "rot-agent", "rot-victim"
		lifetime := env.Options.CredentialLifetime
		Expect(lifetime).To(Equal(time.Hour), "the suite's manager mints short-lived agent credentials")

		// The victim: another cluster, registered by its own agent code.
		victimLocal, err := env.Downstreams[1].Client(kinds.Scheme())
		Expect(err).NotTo(HaveOccurred())
		applyRegistration(victimLocal, victimNS, "rot-victim")
		victimCred, err := join.Ensure(ctx, join.Options{Namespace: victimNS, Local: victimLocal, MinBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		victimClaims, err := upstream.ParseToken(victimCred.Token)
		Expect(err).NotTo(HaveOccurred())

		// The attacker's cluster runs a real agent that renews its 1h token
		// when less than 59m50s remain: ten seconds after each renewal.
		local, err := env.Downstreams[0].Client(kinds.Scheme())
		Expect(err).NotTo(HaveOccurred())
		applyRegistration(local, agentNS, "rot-agent")
		agent, err := framework.Start(env.LogDir, "agent-rotation", "fleet-agent",
			"--kubeconfig", env.Downstreams[0].Kubeconfig, "--namespace", agentNS, "--checkin-interval", "1s",
			"--min-backoff", "100ms", "--max-backoff", "2s", "--rotate-credential-before", "59m50s")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(agent.Stop)

		var leaked *upstream.Credential
		Eventually(func(g Gomega) {
			leaked, err = upstream.LoadStored(ctx, local, agentNS)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(leaked).NotTo(BeNil(), "no credential stored yet; agent log:\n%s", agent.Tail(4000))
		}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
		cluster := types.NamespacedName{Namespace: leaked.Namespace, Name: leaked.ClusterName}

		By("rotating: the stored token changes twice while the agent keeps checking in")
		tokens := []string{leaked.Token}
		var lastSeen time.Time
		lastAdvance := time.Now()
		var longestGap time.Duration
		advancedSinceRotation := 0
		deadline := time.Now().Add(90 * time.Second)
		for len(tokens) < 3 || advancedSinceRotation < 3 {
			Expect(time.Now().Before(deadline)).To(BeTrue(), "rotated %d times, lastSeen advanced %d times since; agent log:\n%s",
				len(tokens)-1, advancedSinceRotation, agent.Tail(4000))
			cred, err := upstream.LoadStored(ctx, local, agentNS)
			Expect(err).NotTo(HaveOccurred())
			if cred != nil && cred.Token != tokens[len(tokens)-1] {
				tokens = append(tokens, cred.Token)
				advancedSinceRotation = 0
			}
			c := &fleet.Cluster{}
			Expect(env.Admin.Get(ctx, cluster, c)).To(Succeed())
			// Its Lease, renewed every check-in.
			seen, err := checkin.LastOf(ctx, env.Admin, c)
			Expect(err).NotTo(HaveOccurred())
			if seen.After(lastSeen) {
				if !lastSeen.IsZero() {
					advancedSinceRotation++
				}
				lastSeen, lastAdvance = seen, time.Now()
			}
			longestGap = max(longestGap, time.Since(lastAdvance))
			time.Sleep(250 * time.Millisecond)
		}
		Expect(longestGap).To(BeNumerically("<", 10*time.Second),
			"the agent checks in every second: no check-in for %s is a gap in service; agent log:\n%s", longestGap, agent.Tail(4000))
		Expect(agent.Output()).To(ContainSubstring("Rotated the agent credential"))
		Expect(agent.Output()).NotTo(ContainSubstring("Check-in failed"), "no check-in may fail across rotations")

		By("the new token works, and the credential Secret holds no stale token")
		current, err := upstream.LoadStored(ctx, local, agentNS)
		Expect(err).NotTo(HaveOccurred())
		Expect(upstream.Check(ctx, current)).To(Succeed())
		stored := &corev1.Secret{}
		Expect(local.Get(ctx, types.NamespacedName{Namespace: agentNS, Name: fleet.AgentName}, stored)).To(Succeed())
		Expect(stored.Data).To(HaveLen(9), "the credential's fields, one token among them, and the manager's address told with the grant")
		for key, value := range stored.Data {
			for _, old := range tokens[:len(tokens)-1] {
				Expect(string(value)).NotTo(Equal(old), "key %s holds a replaced token", key)
			}
		}
		claims, err := upstream.ParseToken(current.Token)
		Expect(err).NotTo(HaveOccurred())
		Expect(claims.Lifetime()).To(Equal(lifetime), "a renewed token lasts as long as the manager's lifetime, no longer")

		By("a leaked credential expires within one lifetime of its minting")
		leakedClaims, err := upstream.ParseToken(leaked.Token)
		Expect(err).NotTo(HaveOccurred())
		Expect(leakedClaims.Lifetime()).To(BeNumerically("<=", lifetime))
		Expect(leakedClaims.Expiry).To(BeTemporally("<=", time.Now().Add(lifetime)))

		By("an agent mints no token, not even for itself, and reads no other cluster's next token")
		attacker, err := upstream.NewClient(current.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		bystander := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: claims.Namespace, Name: "rot-bystander"}}
		Expect(env.Admin.Create(ctx, bystander)).To(Succeed())
		victimSA := &corev1.ServiceAccount{}
		Expect(env.Admin.Get(ctx, types.NamespacedName{Namespace: victimClaims.Namespace, Name: victimClaims.ServiceAccount}, victimSA)).To(Succeed())
		victimCluster := &fleet.Cluster{}
		Expect(env.Admin.Get(ctx, types.NamespacedName{Namespace: victimCred.Namespace, Name: victimCred.ClusterName}, victimCluster)).To(Succeed())
		victimStored := &corev1.Secret{}
		Expect(victimLocal.Get(ctx, types.NamespacedName{Namespace: victimNS, Name: fleet.AgentName}, victimStored)).To(Succeed())

		ownSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: claims.Namespace, Name: claims.ServiceAccount}}
		for _, target := range []*corev1.ServiceAccount{victimSA, bystander, ownSA} {
			seconds := int64(lifetime / time.Second)
			tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
			err := attacker.SubResource("token").Create(ctx, target.DeepCopy(), tr)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "an agent must not mint tokens for %s/%s: %v", target.Namespace, target.Name, err)
			Expect(tr.Status.Token).To(BeEmpty())
		}

		victimNext := types.NamespacedName{Namespace: victimCred.ClusterNamespace, Name: fleet.RenewedCredentialSecretName}
		Eventually(func() error { return env.Admin.Get(ctx, victimNext, &corev1.Secret{}) }, 30*time.Second, 250*time.Millisecond).
			Should(Succeed(), "the manager issued the victim's next token")
		err = attacker.Get(ctx, victimNext, &corev1.Secret{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "an agent must not read another cluster's next token: %v", err)
		own := &corev1.Secret{}
		Expect(attacker.Get(ctx, types.NamespacedName{Namespace: current.ClusterNamespace, Name: fleet.RenewedCredentialSecretName}, own)).To(Succeed(),
			"its own, by name")
		err = attacker.List(ctx, &corev1.SecretList{}, client.InNamespace(current.ClusterNamespace))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "list secrets: %v", err)

		By("nothing of the victim changed")
		afterSA := &corev1.ServiceAccount{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(victimSA), afterSA)).To(Succeed())
		Expect(afterSA.UID).To(Equal(victimSA.UID))
		Expect(afterSA.ResourceVersion).To(Equal(victimSA.ResourceVersion))
		afterCluster := &fleet.Cluster{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(victimCluster), afterCluster)).To(Succeed())
		Expect(afterCluster.UID).To(Equal(victimCluster.UID))
		Expect(afterCluster.Spec).To(Equal(victimCluster.Spec))
		Expect(afterCluster.Labels).To(Equal(victimCluster.Labels))
		afterStored := &corev1.Secret{}
		Expect(victimLocal.Get(ctx, client.ObjectKeyFromObject(victimStored), afterStored)).To(Succeed())
		Expect(afterStored.ResourceVersion).To(Equal(victimStored.ResourceVersion))
		Expect(afterStored.Data).To(Equal(victimStored.Data))
		Expect(upstream.Check(ctx, victimCred)).To(Succeed(), "the victim's credential still works")
	})
})
