package security_test

import (
	"fmt"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/chartrepo"
	"github.com/gitfleet/fleet/test/framework"
)

// helmOpCondition waits until the HelmOp's condition t has status and
// reason, read with c, and returns it.
func helmOpCondition(c client.Client, ns, name, t string, status metav1.ConditionStatus, reason string, within time.Duration) metav1.Condition {
	var found metav1.Condition
	Eventually(func(g Gomega) {
		op := &fleet.HelmOp{}
		g.Expect(c.Get(env.Ctx, client.ObjectKey{Namespace: ns, Name: name}, op)).To(Succeed())
		cond := meta.FindStatusCondition(op.Status.Conditions, t)
		g.Expect(cond).NotTo(BeNil(), "no %s condition yet: %+v", t, op.Status.Conditions)
		g.Expect(cond.Status).To(Equal(status), "%s: %s", cond.Reason, cond.Message)
		g.Expect(cond.Reason).To(Equal(reason), cond.Message)
		found = *cond
	}).WithTimeout(within).WithPolling(200 * time.Millisecond).Should(Succeed())
	return found
}

var _ = Describe("A tenant's HelmOps (foothold e)", func() {
	It("16: Helm credentials go only to the HelmOp's own repository, never to another tenant's HelmOp, and a GitRepoRestriction binds HelmOps", func() {
		ctx, ns, otherNS := env.Ctx, "tenant-helmop", "tenant-helmop-other"
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
		Expect(err).NotTo(HaveOccurred())
		other, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), otherNS)
		Expect(err).NotTo(HaveOccurred())
		chart := []chartrepo.Chart{{Name: "app", Version: "1.0.0", Templates: map[string]string{"cm.yaml": fmt.Sprintf(configMap, "helmop")}}}
		trusted, err := chartrepo.New(chart, chartrepo.Options{Username: "tenant", Password: "helm-s3cret"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(trusted.Close)
		attacker, err := chartrepo.New(chart, chartrepo.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(attacker.Close)
		Expect(tenant.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helm-creds"}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{corev1.BasicAuthUsernameKey: []byte("tenant"), corev1.BasicAuthPasswordKey: []byte("helm-s3cret")}})).To(Succeed())

		By("a target of the HelmOp naming another repository gets no credentials")
		op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}
		op.Spec.Helm = &fleet.HelmOptions{Repo: trusted.URL, Chart: "app", Version: "1.0.0"}
		op.Spec.HelmSecretName = "helm-creds"
		op.Spec.Targets = []fleet.BundleTarget{
			{Name: "stolen", ClusterName: "none", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Repo: attacker.URL}}},
			{Name: "all", ClusterGroup: fleet.DefaultClusterGroup},
		}
		Expect(tenant.Create(ctx, op)).To(Succeed())
		helmOpCondition(tenant, ns, "app", fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonChartApplied, time.Minute)
		n, auths := attacker.Requests()
		Expect(n).To(BeNumerically(">", 0), "the attacker's host was asked for its chart")
		Expect(auths).To(BeEmpty(), "the attacker's host received credentials")
		_, auths = trusted.Requests()
		Expect(auths).NotTo(BeEmpty(), "the HelmOp's own repository gets the credentials")

		By("another tenant naming the same Secret finds none in its own namespace")
		theft := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Namespace: otherNS, Name: "theft"}}
		theft.Spec.Helm = &fleet.HelmOptions{Repo: attacker.URL, Chart: "app"}
		theft.Spec.HelmSecretName = "helm-creds"
		Expect(other.Create(ctx, theft)).To(Succeed())
		c := helmOpCondition(other, otherNS, "theft", fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonSecretNotFound, time.Minute)
		Expect(c.Message).To(ContainSubstring("not found in namespace " + otherNS))
		_, auths = attacker.Requests()
		Expect(auths).To(BeEmpty(), "the attacker's host received credentials")

		By("a GitRepoRestriction of the namespace refuses a chart repository outside its patterns, before any request")
		Expect(env.Admin.Create(ctx, &fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trusted-only"},
			AllowedRepoPatterns: []string{regexp.QuoteMeta(trusted.URL)}})).To(Succeed())
		before, _ := attacker.Requests()
		escape := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "escape"}}
		escape.Spec.Helm = &fleet.HelmOptions{Repo: attacker.URL, Chart: "app"}
		Expect(tenant.Create(ctx, escape)).To(Succeed())
		c = helmOpCondition(tenant, ns, "escape", fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonRestricted, time.Minute)
		Expect(c.Message).To(ContainSubstring("trusted-only does not allow chart repository " + attacker.URL))
		after, _ := attacker.Requests()
		Expect(after).To(Equal(before), "the restricted HelmOp reached the attacker's host")
		b := &fleet.Bundle{}
		Expect(env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "escape"}, b)).NotTo(Succeed(), "no bundle for the restricted HelmOp")
	})
})
