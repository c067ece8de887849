package bundle_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
)

// A HelmOp's bundle (helmOpOptions): no Content, BundleDeployments with
// Fleet's helmChartOptions, and next to each the copy of the HelmOp's
// Secret (only the keys the agent uses), owned by it and deleted with it.
func TestHelmOpsBundleCopiesTheSecretPerDeployment(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "helmops")
	g.Expect(err).NotTo(HaveOccurred())
	targeted := []string{newCluster(ctx, g, ns.Name, "one"), newCluster(ctx, g, ns.Name, "two")}
	g.Expect(env.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "repo-creds", Namespace: ns.Name},
		Data: map[string][]byte{"username": []byte("u"), "password": []byte("p"), "cacerts": []byte("PEM"), "unrelated": []byte("x")}})).To(Succeed())

	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "pulled", Namespace: ns.Name}, Spec: fleet.BundleSpec{
		BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Repo: "https://charts.example.com", Chart: "app", Version: "1.2.0"}},
		HelmOpOptions:           &fleet.BundleHelmOptions{SecretName: "repo-creds", InsecureSkipTLSverify: true},
		Targets:                 []fleet.BundleTarget{{Name: "test", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}}},
	}}
	g.Expect(env.Create(ctx, b)).To(Succeed())
	for _, clusterNS := range targeted {
		g.Eventually(func(g Gomega) {
			bd := &fleet.BundleDeployment{}
			g.Expect(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "pulled"}, bd)).To(Succeed())
			g.Expect(bd.Spec.HelmChartOptions).To(Equal(&fleet.BundleHelmOptions{SecretName: "pulled", InsecureSkipTLSverify: true}))
			g.Expect(bd.Spec.DeploymentID).To(HavePrefix(":"), "no Content")
			g.Expect(bd.Labels[fleet.ContentNameLabel]).To(BeEmpty(), "no Content")
			g.Expect(bd.Spec.Options.Helm.Version).To(Equal("1.2.0"))
			s := &corev1.Secret{}
			g.Expect(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "pulled"}, s)).To(Succeed())
			g.Expect(s.Type).To(Equal(corev1.SecretType(fleet.HelmOpsAccessSecretType)))
			g.Expect(s.Data).To(Equal(map[string][]byte{"username": []byte("u"), "password": []byte("p"), "cacerts": []byte("PEM")}))
			g.Expect(s.OwnerReferences).To(ConsistOf(HaveField("UID", bd.UID)))
		}).WithTimeout(timeout).Should(Succeed(), "the BundleDeployment in %s with helmChartOptions, and its Secret", clusterNS)
	}
	// The HelmOp drops its helmSecretName: the copies go, the
	// BundleDeployments stay.
	setSecretName(ctx, g, b, "")
	for _, clusterNS := range targeted {
		g.Eventually(func(g Gomega) {
			bd := &fleet.BundleDeployment{}
			g.Expect(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "pulled"}, bd)).To(Succeed())
			g.Expect(bd.Spec.HelmChartOptions).To(Equal(&fleet.BundleHelmOptions{InsecureSkipTLSverify: true}))
			g.Expect(apierrors.IsNotFound(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "pulled"}, &corev1.Secret{}))).To(BeTrue())
		}).WithTimeout(timeout).Should(Succeed(), "the Secret copy in %s deleted once no Secret is named", clusterNS)
	}
	setSecretName(ctx, g, b, "repo-creds")
	for _, clusterNS := range targeted {
		g.Eventually(func() error {
			return env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "pulled"}, &corev1.Secret{})
		}).WithTimeout(timeout).Should(Succeed(), "the Secret copy in %s back", clusterNS)
	}

	// The HelmOp's Secret changes (a rotated password), the Bundle does
	// not: every copy follows at once, not at the bundle's next change.
	src := &corev1.Secret{}
	g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "repo-creds"}, src)).To(Succeed())
	src.Data["password"] = []byte("rotated")
	g.Expect(env.Update(ctx, src)).To(Succeed())
	for _, clusterNS := range targeted {
		g.Eventually(func(g Gomega) {
			s := &corev1.Secret{}
			g.Expect(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "pulled"}, s)).To(Succeed())
			g.Expect(string(s.Data["password"])).To(Equal("rotated"))
		}).WithTimeout(timeout).Should(Succeed(), "the Secret copy in %s with the rotated password", clusterNS)
	}

	g.Expect(env.Delete(ctx, b)).To(Succeed())
	for _, clusterNS := range targeted {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "pulled"}, &corev1.Secret{}))
		}).WithTimeout(timeout).Should(BeTrue(), "the Secret copy in %s deleted with its BundleDeployment", clusterNS)
	}
}

// setSecretName writes the Bundle's helmOpOptions.secretName, as the
// HelmOp controller does, again when the bundle controller wrote the Bundle
// meanwhile.
func setSecretName(ctx context.Context, g Gomega, b *fleet.Bundle, name string) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		b.Spec.HelmOpOptions.SecretName = name
		return env.Update(ctx, b)
	})).To(Succeed())
}

// A HelmOp's bundle naming a version constraint, or a missing Secret, is
// refused with the reason saying what to fix; no BundleDeployment is written.
func TestHelmOpsBundleRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, version, secret, reason, msg string
	}{
		{"constraint", "1.x", "", fleet.ReasonInvalidBundle, `helm.version "1.x" is not an exact version`},
		{"no-secret", "1.0.0", "missing", fleet.ReasonSecretNotFound, "Secret missing not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns, err := env.CreateNamespace(ctx, "helmops-bad")
			g.Expect(err).NotTo(HaveOccurred())
			clusterNS := newCluster(ctx, g, ns.Name, "one")
			b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns.Name}, Spec: fleet.BundleSpec{
				BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Repo: "https://charts.example.com", Chart: "app", Version: tc.version}},
				HelmOpOptions:           &fleet.BundleHelmOptions{SecretName: tc.secret},
				Targets:                 []fleet.BundleTarget{{Name: "test", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}}},
			}}
			g.Expect(env.Create(ctx, b)).To(Succeed())
			g.Eventually(func(g Gomega) {
				got := &fleet.Bundle{}
				g.Expect(env.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
				c := conditions.Get(got, fleet.ConditionReady)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(tc.reason))
				g.Expect(c.Message).To(ContainSubstring(tc.msg))
			}).WithTimeout(timeout).Should(Succeed())
			g.Expect(apierrors.IsNotFound(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "bad"}, &fleet.BundleDeployment{}))).To(BeTrue())
		})
	}
}
