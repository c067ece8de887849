package security_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/framework"
)

// The footholds themselves: each attack below relies on them holding exactly
// the rights they stand for, no more.
var _ = Describe("Footholds", func() {
	It("a tenant writes in its own namespace and reads nothing elsewhere", func() {
		ctx := env.Ctx
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), "tenant-foothold")
		Expect(err).NotTo(HaveOccurred())
		own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-foothold", Name: "mine"}}
		Expect(tenant.Create(ctx, own)).To(Succeed())

		err = tenant.List(ctx, &corev1.SecretList{}, client.InNamespace(fleet.DefaultWorkspace))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a tenant must not list another namespace's Secrets: %v", err)
		err = tenant.List(ctx, &fleet.ClusterList{}, client.InNamespace(fleet.DefaultWorkspace))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a tenant must not list another namespace's Clusters: %v", err)
		err = tenant.Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultWorkspace, Name: "x"}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a tenant must not create Clusters elsewhere: %v", err)
	})
})
