package bundledeployment_test

import (
	"crypto/ecdh"
	"encoding/json"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/bundledeployment"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/outcome"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOpenSOPS: SOPS files are opened, others pass as they are, the shared
// resources are not changed, and a file for other keys stalls naming it.
func TestOpenSOPS(t *testing.T) {
	g := NewWithT(t)
	in := []fleet.BundleResource{
		{Name: "cm.yaml", Content: appConfig},
		{Name: "secret.yaml", Content: fixture(t, "secret.sops.yaml")},
	}
	out, err := bundledeployment.OpenSOPS(in, agentKeys)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out[0]).To(Equal(in[0]))
	g.Expect(out[1].Content).To(ContainSubstring("opened-at-the-agent"))
	g.Expect(out[1].Content).NotTo(ContainSubstring("sops:"))
	g.Expect(in[1].Content).To(ContainSubstring("ENC[AES256_GCM"), "the Content's resources are left as they are")

	in[1].Content = fixture(t, "other-cluster.sops.yaml")
	_, err = bundledeployment.OpenSOPS(in, agentKeys)
	g.Expect(err).To(HaveOccurred())
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonSOPSUnreadable))
	g.Expect(err.Error()).To(ContainSubstring("SOPS file secret.yaml does not open on this cluster"))
	g.Expect(err.Error()).To(ContainSubstring("not one of its age recipients"))

	_, err = bundledeployment.OpenSOPS(in, []*ecdh.PrivateKey{nil})
	g.Expect(err).To(HaveOccurred(), "an agent without keys opens nothing")
}

// TestSOPSAtTheAgent: a bundle with a SOPS file encrypted for this agent
// deploys it opened; one encrypted for another cluster deploys nothing of
// the bundle and says which file and why.
func TestSOPSAtTheAgent(t *testing.T) {
	runAgent(t)
	ctx := t.Context()
	g := NewWithT(t)

	id := newContent(ctx, t, map[string]string{"cm.yaml": appConfig, "secret.yaml": fixture(t, "secret.sops.yaml")})
	bd := newBundleDeployment(ctx, t, "sops-mine", id, "sops-mine")
	waitReady(ctx, t, bd, id)
	s := &corev1.Secret{}
	g.Expect(down.Get(ctx, client.ObjectKey{Namespace: "sops-mine", Name: "sops-secret"}, s)).To(Succeed())
	g.Expect(string(s.Data["password"])).To(Equal("opened-at-the-agent"))
	status, err := json.Marshal(get(ctx, g, bd).Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(status)).NotTo(ContainSubstring("opened-at-the-agent"))

	id = newContent(ctx, t, map[string]string{"cm.yaml": appConfig, "secret.yaml": fixture(t, "other-cluster.sops.yaml")})
	other := newBundleDeployment(ctx, t, "sops-other", id, "sops-other")
	g.Eventually(func(g Gomega) {
		got := get(ctx, g, other)
		c := conditions.Get(got, fleet.ConditionDeployed)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(fleet.ReasonSOPSUnreadable))
		g.Expect(c.Message).To(ContainSubstring("SOPS file secret.yaml does not open on this cluster"))
		g.Expect(conditions.IsTrue(got, fleet.ConditionReady)).To(BeFalse())
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Consistently(func() bool {
		err := down.Get(ctx, client.ObjectKey{Namespace: "sops-other", Name: "app-config"}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(2*time.Second).Should(BeTrue(), "nothing of the bundle is deployed")
	g.Expect(releasesOf(ctx, g, "sops-other", "sops-other")).To(BeEmpty())
}
