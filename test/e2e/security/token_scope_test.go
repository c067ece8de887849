package security_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/satoken"
	"github.com/gitfleet/fleet/test/framework"
)

var _ = Describe("The manager's token rights", func() {
	It("12: the manager's own credential mints no token in the system namespaces or its own, and still mints them for agents", func() {
		ctx := env.Ctx
		// The foothold: the manager's own ServiceAccount token, as a stolen
		// copy of the manager's credential would be.
		manager, _, err := framework.ServiceAccountClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(),
			fleet.DefaultSystemNamespace, "fleet-manager")
		Expect(err).NotTo(HaveOccurred())

		// A powerful ServiceAccount in kube-system (the local control plane
		// runs no controller that would make kube-system's own).
		Expect(env.Admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "powerful"}})).To(Succeed())
		for _, target := range [][2]string{{"kube-system", "powerful"}, {fleet.DefaultSystemNamespace, "fleet-manager"}} {
			_, err := satoken.Mint(ctx, manager, target[0], target[1], time.Hour)
			Expect(err).To(MatchError(ContainSubstring("never in the system namespaces or its own")),
				"a token for %s/%s must be refused by the admission policy", target[0], target[1])
		}

		By("where agents live it still mints tokens, as registration needs")
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sec-cluster-ns-"}}
		Expect(env.Admin.Create(ctx, ns)).To(Succeed())
		Expect(env.Admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "agent"}})).To(Succeed())
		token, err := satoken.Mint(ctx, manager, ns.Name, "agent", time.Hour)
		Expect(err).NotTo(HaveOccurred())
		Expect(token).NotTo(BeEmpty())
	})
})
