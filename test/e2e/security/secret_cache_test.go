package security_test

import (
	"bytes"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/framework"
)

// Hole 32.3: the manager cached every Secret labelled
// fleet.cattle.io/managed=true, in every namespace, and whoever may write
// Secrets may set a label: a tenant (foothold a) filled the manager's
// memory with its own Secrets (100 of 900 KiB: +134 MiB). The manager now
// caches Secrets only in the namespaces it owns, and reads the rest
// uncached, by name.
var _ = Describe("Hole 32.3: a tenant cannot fill the manager's memory with Secrets labelled as the manager's", Ordered, func() {
	const (
		ns    = "tenant-secret-flood"
		count = 16
		size  = 512 << 10
	)

	It("32.3: the manager's cache holds none of the tenant's Secrets, and tokens of its namespace are still issued", func() {
		ctx := env.Ctx
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
		Expect(err).NotTo(HaveOccurred())

		By(fmt.Sprintf("the tenant writes %d Secrets of %d KiB, labelled as the manager's and as a token's values", count, size>>10))
		written := map[string]string{}
		for i := range count {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("flood-%d-token", i),
				Labels: map[string]string{fleet.ManagedLabel: "true", fleet.RegistrationTokenLabel: fmt.Sprintf("flood-%d", i)}},
				Data: map[string][]byte{"blob": bytes.Repeat([]byte{'x'}, size)}}
			Expect(tenant.Create(ctx, s)).To(Succeed())
			written[s.Name] = s.ResourceVersion
		}

		By("a Secret the manager caches, written after them, shows when its cache has caught up")
		// One watch stream would bring the tenant's Secrets before it: a
		// cache that held them would hold them all by then.
		marker := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultSystemNamespace, Name: "sec-32-3-marker",
			Labels: map[string]string{fleet.ManagedLabel: "true"}}}
		Expect(env.Admin.Create(ctx, marker)).To(Succeed())
		DeferCleanup(func() { _ = env.Admin.Delete(ctx, marker) })
		Eventually(func() error {
			return env.ManagerCache.Get(ctx, client.ObjectKeyFromObject(marker), &corev1.Secret{})
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("the manager's cache holds no Secret of the tenant's namespace")
		held := &corev1.SecretList{}
		Expect(env.ManagerCache.List(ctx, held)).To(Succeed())
		var bytesHeld int
		for _, s := range held.Items {
			Expect(s.Namespace).NotTo(Equal(ns), "the manager keeps the tenant's Secret %s in memory", s.Name)
			Expect([]string{fleet.DefaultSystemNamespace, fleet.DefaultSystemRegistrationNamespace, fleet.LocalWorkspace}).
				To(ContainElement(s.Namespace), "the manager keeps Secret %s/%s, of a namespace it does not own, in memory", s.Namespace, s.Name)
			for _, v := range s.Data {
				bytesHeld += len(v)
			}
		}
		Expect(bytesHeld).To(BeNumerically("<", size), "the Secrets in the manager's cache")
		err = env.ManagerCache.Get(ctx, types.NamespacedName{Namespace: ns, Name: "flood-0-token"}, &corev1.Secret{})
		Expect(err).To(HaveOccurred(), "the manager's cache serves a Secret of the tenant's namespace")

		By("a registration token of the tenant's namespace is still issued, its values read uncached")
		token, boot, err := agentinstall.CreateToken(ctx, env.Admin, agentinstall.TokenOptions{Namespace: ns, Name: "issued", TTL: time.Hour})
		Expect(err).NotTo(HaveOccurred())
		Expect(boot.Token).NotTo(BeEmpty())
		values := types.NamespacedName{Namespace: ns, Name: token.Status.SecretName}
		first := &corev1.Secret{}
		Expect(env.Admin.Get(ctx, values, first)).To(Succeed())

		By("its values Secret deleted is heard of through the metadata watch, and issued anew")
		Expect(env.Admin.Delete(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			again := &corev1.Secret{}
			g.Expect(env.Admin.Get(ctx, values, again)).To(Succeed())
			g.Expect(again.UID).NotTo(Equal(first.UID))
			v, err := agentinstall.TokenValues(again)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.Token).NotTo(Equal(boot.Token), "values of the deleted Secret are revoked, new ones issued")
		}, 60*time.Second, 200*time.Millisecond).Should(Succeed())

		By("nothing of the tenant's Secrets changed")
		for name, rv := range written {
			s := &corev1.Secret{}
			Expect(env.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)).To(Succeed())
			Expect(s.ResourceVersion).To(Equal(rv), "the manager wrote the tenant's Secret %s", name)
		}
	})
})
