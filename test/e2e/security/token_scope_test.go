package security_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/satoken"
	"github.com/gitfleet/fleet/test/framework"
)

var _ = Describe("The manager's token rights", func() {
	It("12: the manager's own credential mints tokens only for ServiceAccounts it made, and deletes only its cluster namespaces", func() {
		ctx := env.Ctx
		// The foothold: the manager's own ServiceAccount token, as a stolen
		// copy of the manager's credential would be.
		manager, _, err := framework.ServiceAccountClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(),
			fleet.DefaultSystemNamespace, "fleet-manager")
		Expect(err).NotTo(HaveOccurred())

		// Victims: a powerful ServiceAccount in kube-system (the local
		// control plane runs no controller that would make kube-system's
		// own), the manager's own, and a tenant's deploy bot in a workspace
		// where registration tokens are made.
		tenantNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sec-tenant-"}}
		Expect(env.Admin.Create(ctx, tenantNS)).To(Succeed())
		for _, sa := range [][2]string{{"kube-system", "powerful"}, {tenantNS.Name, "deploy-bot"}} {
			Expect(env.Admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa[0], Name: sa[1]}})).To(Succeed())
		}
		for _, target := range [][2]string{{"kube-system", "powerful"}, {fleet.DefaultSystemNamespace, "fleet-manager"}, {tenantNS.Name, "deploy-bot"}} {
			_, err := satoken.Mint(ctx, manager, target[0], target[1], time.Hour)
			Expect(err).To(MatchError(ContainSubstring("mints tokens only in")),
				"a token for %s/%s must be refused by the admission policy", target[0], target[1])
		}

		By("it cannot make a tenant's namespace look like one of its own, nor delete it")
		victim := tenantNS.DeepCopy()
		victim.Labels = map[string]string{fleet.ManagedLabel: "true"}
		err = manager.Update(ctx, victim)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "relabelling a namespace is refused by RBAC, got %v", err)
		err = manager.Delete(ctx, tenantNS.DeepCopy())
		Expect(err).To(MatchError(ContainSubstring("deletes only the cluster namespaces it made")))
		after := &corev1.Namespace{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(tenantNS), after)).To(Succeed())
		Expect(after.DeletionTimestamp).To(BeNil())
		Expect(after.Labels).NotTo(HaveKey(fleet.ManagedLabel))

		By("where agents and registration tokens live it still mints tokens, as registration needs")
		clusterNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sec-cluster-ns-",
			Labels: map[string]string{fleet.ManagedLabel: "true"}}}
		Expect(manager.Create(ctx, clusterNS)).To(Succeed())
		regNS := names.SystemRegistrationNamespace(fleet.DefaultSystemNamespace)
		for _, target := range [][2]string{{clusterNS.Name, "agent"}, {regNS, "token-sec-scope-check"}} {
			Expect(manager.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: target[0], Name: target[1]}})).To(Succeed())
			token, err := satoken.Mint(ctx, manager, target[0], target[1], time.Hour)
			Expect(err).NotTo(HaveOccurred(), "minting for %s/%s", target[0], target[1])
			Expect(token).NotTo(BeEmpty())
		}
		Expect(manager.Delete(ctx, clusterNS)).To(Succeed(), "its own cluster namespaces it may delete")
	})
})

// whoAmI is the user a bearer token authenticates as.
func whoAmI(token string) string {
	cs, err := kubernetes.NewForConfig(framework.BearerConfig(env.Upstream.Config, token))
	Expect(err).NotTo(HaveOccurred())
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(env.Ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return review.Status.UserInfo.Username
}
