package badinput

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/join"
	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/upstream"
	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	internalregistration "github.com/gitfleet/fleet/internal/registration"
)

// The workspace of the registration cases, apart from the healthy one.
const regWS = "reg-ws"

// tokenClient acts with a registration token's rights, as an agent does.
func tokenClient(b *agentinstall.Bootstrap) client.Client {
	GinkgoHelper()
	c, err := client.New(&rest.Config{Host: b.APIServerURL, BearerToken: b.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte(b.APIServerCA)}, Timeout: 10 * time.Second},
		client.Options{Scheme: kinds.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// agentNamespace prepares, on the manager's own API server, what an agent's
// cluster holds before it registers: the bootstrap Secret and the agent
// ConfigMap with a fixed identity.
func (f *fixture) agentNamespace(ns string, b *agentinstall.Bootstrap, clientID string, labels map[string]string) {
	GinkgoHelper()
	Expect(f.admin.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(f.admin.Create(f.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fleet.AgentBootstrapSecretName},
		Data: map[string][]byte{
			agentinstall.BootstrapAPIServerURLKey:                []byte(b.APIServerURL),
			agentinstall.BootstrapAPIServerCAKey:                 []byte(b.APIServerCA),
			agentinstall.BootstrapTokenKey:                       []byte(b.Token),
			agentinstall.BootstrapClusterNamespaceKey:            []byte(b.ClusterNamespace),
			agentinstall.BootstrapSystemRegistrationNamespaceKey: []byte(b.SystemRegistrationNamespace),
			agentinstall.BootstrapTokenNameKey:                   []byte(b.TokenName),
		},
	})).To(Succeed())
	l := make([]string, 0, len(labels))
	for k, v := range labels {
		l = append(l, fmt.Sprintf("%s: %s", k, v))
	}
	Expect(f.admin.Create(f.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fleet.AgentName},
		Data:       map[string]string{agentinstall.ConfigKey: fmt.Sprintf("clientID: %s\nlabels: {%s}\n", clientID, strings.Join(l, ", "))},
	})).To(Succeed())
}

// register runs the agent's registration against the agent namespace ns
// until it has a credential.
func (f *fixture) register(ns string) *upstream.Credential {
	GinkgoHelper()
	rctx, cancel := context.WithTimeout(f.ctx, timeout)
	defer cancel()
	cred, err := join.Ensure(rctx, join.Options{Namespace: ns, Local: f.admin, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
	Expect(err).NotTo(HaveOccurred())
	return cred
}

// agentLog runs the agent's registration for ns until its log says want,
// then stops it, and returns the log.
func (f *fixture) agentLog(ns string, want ...string) string {
	GinkgoHelper()
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	rctx, cancel := context.WithCancel(logr.NewContext(f.ctx, logger))
	done := make(chan error, 1)
	go func() {
		_, err := join.Ensure(rctx, join.Options{Namespace: ns, Local: f.admin, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
		done <- err
	}()
	logs := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
	Eventually(logs, timeout, poll).Should(containsAll(want...))
	cancel()
	Expect(<-done).To(MatchError(context.Canceled), "the agent got no credential")
	return logs()
}

// identities lists the clientIDs of every Cluster and ClusterRegistration.
func (f *fixture) identities() []string {
	GinkgoHelper()
	clusters := &fleet.ClusterList{}
	Expect(f.admin.List(f.ctx, clusters)).To(Succeed())
	regs := &fleet.ClusterRegistrationList{}
	Expect(f.admin.List(f.ctx, regs)).To(Succeed())
	out := make([]string, 0, len(clusters.Items)+len(regs.Items))
	for _, c := range clusters.Items {
		out = append(out, "cluster "+c.Namespace+"/"+c.Name+" "+c.Spec.ClientID)
	}
	for _, r := range regs.Items {
		out = append(out, "registration "+r.Namespace+"/"+r.Name+" "+r.Spec.ClientID)
	}
	return out
}

// withSignature replaces the signature of a JWT; withClaims replaces a
// claim's value in its payload and keeps the signature.
func withSignature(jwt string) string {
	parts := strings.Split(jwt, ".")
	parts[2] = base64.RawURLEncoding.EncodeToString([]byte("a signature nobody made"))
	return strings.Join(parts, ".")
}

func withClaims(jwt, from, to string) string {
	parts := strings.Split(jwt, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	Expect(err).NotTo(HaveOccurred())
	Expect(string(payload)).To(ContainSubstring(from))
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.ReplaceAll(string(payload), from, to)))
	return strings.Join(parts, ".")
}

func (f *fixture) registrationSurface() {
	BeforeAll(func() {
		Expect(f.admin.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: regWS}})).To(Succeed())
		var err error
		_, f.validBoot, err = agentinstall.CreateToken(f.ctx, f.admin, agentinstall.TokenOptions{Namespace: regWS, Name: "valid"})
		must(err)
		// A token whose TTL passes: issued with an hour, then cut to a second
		// (issued with a second, it could expire before it is issued).
		var expired *fleet.ClusterRegistrationToken
		expired, f.expiredBoot, err = agentinstall.CreateToken(f.ctx, f.admin, agentinstall.TokenOptions{Namespace: regWS, Name: "expired", TTL: time.Hour})
		must(err)
		patch := client.MergeFrom(expired.DeepCopy())
		expired.Spec.TTL = &metav1.Duration{Duration: time.Second}
		Expect(f.admin.Patch(f.ctx, expired, patch)).To(Succeed())
		var revoked *fleet.ClusterRegistrationToken
		revoked, f.revokedBoot, err = agentinstall.CreateToken(f.ctx, f.admin, agentinstall.TokenOptions{Namespace: regWS, Name: "revoked"})
		must(err)
		Expect(f.admin.Delete(f.ctx, revoked)).To(Succeed())

		f.agentNamespace("victim-agent", f.validBoot, "victim-id", map[string]string{"role": "victim"})
		f.victimCred = f.register("victim-agent")
		f.victim = &fleet.Cluster{}
		Expect(f.admin.Get(f.ctx, types.NamespacedName{Namespace: regWS, Name: f.victimCred.ClusterName}, f.victim)).To(Succeed())
		Expect(upstream.Check(f.ctx, f.victimCred)).To(Succeed())

		for _, name := range []string{"expired", "revoked"} {
			Eventually(func() bool {
				return f.notFound(&fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: regWS, Name: name}})
			}, timeout, poll).Should(BeTrue(), "the manager deletes token %s", name)
		}
	})

	DescribeTable("a bearer token the API server refuses (401), and the agent says why", func(bearer func() string) {
		before := f.identities()
		token := bearer()
		c := tokenClient(&agentinstall.Bootstrap{APIServerURL: f.validBoot.APIServerURL, APIServerCA: f.validBoot.APIServerCA, Token: token})
		err := c.Create(f.ctx, &fleet.ClusterRegistration{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "request-", Namespace: regWS, Labels: map[string]string{fleet.RegistrationTokenLabel: "valid"}},
			Spec:       fleet.ClusterRegistrationSpec{ClientID: "intruder", ClientRandom: "0123456789abcdef0123"},
		})
		Expect(apierrors.IsUnauthorized(err)).To(BeTrue(), "want 401 Unauthorized, got %v", err)
		By("The API server says: " + err.Error())

		ns := fmt.Sprintf("agent-%d", CurrentSpecReport().LeafNodeLocation.LineNumber)
		boot := *f.validBoot
		boot.Token = token
		f.agentNamespace(ns, &boot, "intruder", nil)
		log := f.agentLog(ns, "the registration token was rejected (Unauthorized): it has expired or was revoked")
		By("The agent says: " + log[:min(len(log), 400)])
		Expect(f.identities()).To(Equal(before), "no Cluster and no registration were made")
		f.expectUndisturbed()
	},
		Entry("garbage", func() string { return "not-a-token" }),
		Entry("a forged JWT", func() string {
			enc := base64.RawURLEncoding.EncodeToString
			return enc([]byte(`{"alg":"RS256","kid":"forged"}`)) + "." +
				enc([]byte(`{"iss":"https://kubernetes.default.svc.cluster.local","sub":"system:serviceaccount:reg-ws:valid"}`)) + "." + enc([]byte("sig"))
		}),
		Entry("a valid token with another signature", func() string { return withSignature(f.validBoot.Token) }),
		Entry("a valid token with altered claims (another ServiceAccount)", func() string {
			sa := names.RegistrationTokenServiceAccount(regWS, "valid")
			return withClaims(f.validBoot.Token, `"name":"`+sa+`"`, `"name":"victim"`)
		}),
		Entry("an expired token", func() string { return f.expiredBoot.Token }),
		Entry("a token deleted by an admin", func() string { return f.revokedBoot.Token }),
	)

	DescribeTable("a token Secret with altered values registers nothing, and the agent says why", func(alter func(b *agentinstall.Bootstrap), want ...string) {
		before := f.identities()
		ns := fmt.Sprintf("altered-%d", CurrentSpecReport().LeafNodeLocation.LineNumber)
		boot := *f.validBoot
		alter(&boot)
		f.agentNamespace(ns, &boot, "altered-"+ns, nil)
		log := f.agentLog(ns, want...)
		By("The agent says: " + log[:min(len(log), 400)])
		Expect(f.identities()).To(Equal(before), "no Cluster and no registration were made")
		f.expectUndisturbed()
	},
		Entry("clusterNamespace of another workspace", func(b *agentinstall.Bootstrap) { b.ClusterNamespace = ws },
			"the registration token may not do this (Forbidden)"),
		Entry("an empty token", func(b *agentinstall.Bootstrap) { b.Token = "" }, "the registration token is empty"),
		Entry("an API server URL nobody answers on", func(b *agentinstall.Bootstrap) { b.APIServerURL = "https://" + freeAddr() },
			"creating the cluster registration", "connection refused"),
		Entry("an apiServerCA that is no certificate", func(b *agentinstall.Bootstrap) { b.APIServerCA = "not a certificate" },
			"unable to load root certificates"),
		Entry("the CA of another server", func(b *agentinstall.Bootstrap) {
			other := httptest.NewTLSServer(nil)
			other.Close()
			b.APIServerCA = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: other.Certificate().Raw}))
		}, "certificate signed by unknown authority"),
	)

	f.refusedRegistrations()
	f.clientIDOfAnotherCluster()
}

// refusedRegistrations: ClusterRegistrations the manager refuses to grant.
func (f *fixture) refusedRegistrations() {
	DescribeTable("a ClusterRegistration the manager refuses to grant", func(mutate func(*fleet.ClusterRegistration), why string) {
		c := tokenClient(f.validBoot)
		line := CurrentSpecReport().LeafNodeLocation.LineNumber
		reg := &fleet.ClusterRegistration{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("request-refused-%d", line), Namespace: regWS,
				Labels: map[string]string{fleet.RegistrationTokenLabel: f.validBoot.TokenName}},
			Spec: fleet.ClusterRegistrationSpec{ClientID: fmt.Sprintf("refused-%d", line),
				ClientRandom: "0123456789abcdef0123", PublicKey: newPublicKey()},
		}
		mutate(reg)
		// Proven with the token's value, as an agent does, unless the entry
		// brings a proof of its own.
		if _, set := reg.Annotations[fleet.RegistrationProofAnnotation]; !set {
			internalregistration.Prove(f.validBoot.Token, reg)
		}
		Expect(c.Create(f.ctx, reg)).To(Succeed(), "the token may create registrations")
		// A good registration made after it: once that one is granted, the
		// manager has had its look at the bad one too.
		control := &fleet.ClusterRegistration{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("control-refused-%d", line), Namespace: regWS,
				Labels: map[string]string{fleet.RegistrationTokenLabel: f.validBoot.TokenName}},
			Spec: fleet.ClusterRegistrationSpec{ClientID: "control-" + reg.Name, ClientRandom: "0123456789abcdef0123", PublicKey: newPublicKey()},
		}
		internalregistration.Prove(f.validBoot.Token, control)
		Expect(c.Create(f.ctx, control)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(control), control)).To(Succeed())
			g.Expect(control.Status.Granted).To(BeTrue())
		}, timeout, poll).Should(Succeed())
		By("Refused because " + why)
		Eventually(func(g Gomega) {
			g.Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(reg), reg)).To(Succeed())
			c := meta.FindStatusCondition(reg.Status.Conditions, fleet.ConditionAccepted)
			g.Expect(c).NotTo(BeNil(), "condition Accepted")
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring(why))
		}, timeout, poll).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(reg), reg)).To(Succeed())
			g.Expect(reg.Status.Granted).To(BeFalse())
			g.Expect(reg.Status.ClusterName).To(BeEmpty())
		}, time.Second, 200*time.Millisecond).Should(Succeed())
		clusters := &fleet.ClusterList{}
		Expect(f.admin.List(f.ctx, clusters)).To(Succeed())
		for _, cl := range clusters.Items {
			Expect(cl.Spec.ClientID).NotTo(Equal(reg.Spec.ClientID), "no Cluster for the refused identity")
		}
		Expect(f.notFound(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultSystemRegistrationNamespace,
			Name: names.CredentialSecret(reg.Spec.ClientID, reg.Spec.ClientRandom)}})).To(BeTrue(), "no credential")
		Expect(upstream.Check(f.ctx, f.victimCred)).To(Succeed(), "the victim's credential still works")
		f.expectUndisturbed()
	},
		Entry("a clientRandom of 3 characters", func(r *fleet.ClusterRegistration) { r.Spec.ClientRandom = "abc" },
			"spec.clientRandom must be 16 to 256 characters"),
		Entry("a clientID of 300 characters", func(r *fleet.ClusterRegistration) { r.Spec.ClientID = strings.Repeat("x", 300) },
			"spec.clientID must be set and at most 256 characters"),
		Entry("no publicKey (an agent of an earlier version)", func(r *fleet.ClusterRegistration) { r.Spec.PublicKey = "" },
			"spec.publicKey"),
		Entry("a publicKey that is no X25519 key", func(r *fleet.ClusterRegistration) {
			r.Spec.PublicKey = base64.StdEncoding.EncodeToString([]byte("short"))
		}, "spec.publicKey is not an X25519 public key"),
		Entry("no registration-token label", func(r *fleet.ClusterRegistration) { r.Labels = nil },
			"naming the registration token is missing"),
		Entry("no proof of holding the token (an agent of an earlier version)", func(r *fleet.ClusterRegistration) {
			r.Annotations = map[string]string{fleet.RegistrationProofAnnotation: ""}
		}, "the registration does not prove it was made with registration token valid"),
		Entry("a proof made with another value than the token's", func(r *fleet.ClusterRegistration) {
			internalregistration.Prove("not the token's value", r)
		}, "the registration does not prove it was made with registration token valid"),
		Entry("a registration-token label naming no token", func(r *fleet.ClusterRegistration) {
			r.Labels[fleet.RegistrationTokenLabel] = "no-such-token"
		}, "registration token reg-ws/no-such-token does not exist"),
		Entry("a clientID whose Cluster name another identity holds", func(r *fleet.ClusterRegistration) {
			squatted := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: regWS, Name: names.ClusterForClientID("squatter")},
				Spec: fleet.ClusterSpec{ClientID: "owner"}}
			Expect(f.admin.Create(f.ctx, squatted)).To(Succeed())
			r.Spec.ClientID = "squatter"
			DeferCleanup(func() {
				Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(squatted), squatted)).To(Succeed())
				Expect(squatted.Spec.ClientID).To(Equal("owner"), "the Cluster keeps its identity")
			})
		}, "already belongs to another identity (spec.clientID): delete that Cluster, or give this agent a clientID of its own"),
	)
}

// clientIDOfAnotherCluster: a registration naming another cluster's
// clientID gets no credential of that cluster.
func (f *fixture) clientIDOfAnotherCluster() {
	It("grants a registration with another cluster's clientID onto that Cluster without handing out its credential", func() {
		victimReg := &fleet.ClusterRegistration{}
		regs := &fleet.ClusterRegistrationList{}
		Expect(f.admin.List(f.ctx, regs, client.InNamespace(regWS))).To(Succeed())
		for i := range regs.Items {
			if regs.Items[i].Spec.ClientID == "victim-id" {
				victimReg = &regs.Items[i]
			}
		}
		Expect(victimReg.Name).NotTo(BeEmpty())
		victimSecret := names.CredentialSecret("victim-id", victimReg.Spec.ClientRandom)

		f.agentNamespace("intruder-agent", f.validBoot, "victim-id", map[string]string{"role": "intruder", "env": "prod"})
		intruder := f.register("intruder-agent")

		By("landing on the victim's Cluster, not a second one, and leaving its labels alone")
		Expect(intruder.ClusterName).To(Equal(f.victim.Name))
		clusters := &fleet.ClusterList{}
		Expect(f.admin.List(f.ctx, clusters, client.InNamespace(regWS))).To(Succeed())
		n := 0
		for _, c := range clusters.Items {
			if c.Spec.ClientID == "victim-id" {
				n++
				Expect(c.Labels).To(Equal(f.victim.Labels), "the intruder's labels are not applied")
				Expect(c.UID).To(Equal(f.victim.UID))
			}
		}
		Expect(n).To(Equal(1))

		By("not letting the token read the victim's credential Secret")
		err := tokenClient(f.validBoot).Get(f.ctx, types.NamespacedName{Namespace: fleet.DefaultSystemRegistrationNamespace, Name: victimSecret}, &corev1.Secret{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		Expect(intruder.Token).NotTo(Equal(f.victimCred.Token), "a credential of its own, not the victim's")

		// What the manager does to the victim is reported, not asserted: see
		// the report of this suite.
		victimCheck := upstream.Check(f.ctx, f.victimCred)
		msg := fmt.Sprintf("After a registration with the victim's clientID: the victim's credential check says %v; "+
			"the intruder's credential reads the victim's cluster namespace: %v", victimCheck, upstream.Check(f.ctx, intruder))
		AddReportEntry("registration with another cluster's clientID", msg)
		GinkgoWriter.Println(msg)
		f.expectUndisturbed()
	})
}

// newPublicKey is a fresh spec.publicKey, as an agent makes one per request.
func newPublicKey() string {
	GinkgoHelper()
	key, err := internalregistration.NewKey()
	Expect(err).NotTo(HaveOccurred())
	return internalregistration.EncodePublicKey(key)
}
