package bundledeployment_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/summary"
)

// TestDeployBinary covers what the agent's second binary brings: a missing
// one is reported on the BundleDeployment, and one killed mid-deploy leaves
// the release pending, as a crashed agent would, for the next deploy to
// recover.
func TestDeployBinary(t *testing.T) {
	t.Run("a missing deploy binary is reported, naming the flag", aMissingDeployBinaryIsReported)
	t.Run("a deploy killed mid-way leaves the release pending and the next one recovers it", aKilledDeployIsRecovered)
}

func aMissingDeployBinaryIsReported(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	stop := runAgentWith(t, "/nonexistent/fleet-agent-deploy")
	defer stop()
	id := newContent(ctx, t, map[string]string{"cm.yaml": appConfig})
	bd := newBundleDeployment(ctx, t, "no-binary", id, "no-binary")
	g.Eventually(func(g Gomega) {
		c := conditions.Get(get(ctx, g, bd), fleet.ConditionDeployed)
		g.Expect(c).NotTo(BeNil(), "no Deployed condition yet")
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(fleet.ReasonDeployBinaryMissing))
		g.Expect(c.Message).To(ContainSubstring("/nonexistent/fleet-agent-deploy"))
		g.Expect(c.Message).To(ContainSubstring("--deploy-binary"))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the Deployed condition to say the deploy binary is missing")
}

// runningDeployBinaries lists the processes running deployBinary.
func runningDeployBinaries() []string {
	exes, _ := filepath.Glob("/proc/[0-9]*/exe")
	var pids []string
	for _, exe := range exes {
		if target, err := os.Readlink(exe); err == nil && target == deployBinary {
			pids = append(pids, filepath.Base(filepath.Dir(exe)))
		}
	}
	return pids
}

// lastRecord is the status of the latest release record of key, read as
// Helm wrote it.
func lastRecord(ctx context.Context, g Gomega, key release.Key) release.Status {
	r, err := release.Reader{Client: down}.Last(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r).NotTo(BeNil(), "no release record of %s", key)
	return r.Status()
}

func aKilledDeployIsRecovered(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	// The downstream cluster runs no controllers: the Deployment never
	// becomes available, and an atomic install waits on it.
	id := newContent(ctx, t, map[string]string{"web.yaml": webDeployment})
	bd := newBundleDeployment(ctx, t, "killed", id, "killed")
	bd.Spec.Options.Helm = &fleet.HelmOptions{Atomic: true, TimeoutSeconds: 600}
	g.Expect(up.Update(ctx, bd)).To(Succeed())
	key := release.Key{Namespace: "killed", Name: "killed"}

	stop := runAgentWith(t, deployBinary)
	g.Eventually(func(g Gomega) {
		g.Expect(lastRecord(ctx, g, key)).To(Equal(release.StatusPendingInstall))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the install to be under way")
	// Stopping the agent kills the deploy binary (it would otherwise wait
	// ten minutes): the release stays pending.
	g.Expect(runningDeployBinaries()).NotTo(BeEmpty(), "the install's deploy binary is running")
	stop()
	g.Eventually(runningDeployBinaries).WithTimeout(10*time.Second).WithPolling(100*time.Millisecond).Should(BeEmpty(),
		"the deploy binary to be killed with the agent")
	g.Consistently(func(g Gomega) {
		g.Expect(lastRecord(ctx, g, key)).To(Equal(release.StatusPendingInstall))
	}).WithTimeout(2*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "the killed install's release to stay pending")

	// The bundle no longer waits; the next agent recovers the pending
	// release (uninstalls it: no revision was ever deployed) and installs.
	g.Expect(up.Get(ctx, client.ObjectKeyFromObject(bd), bd)).To(Succeed())
	bd.Spec.Options.Helm = nil
	bd.Spec.DeploymentID = id + "-nowait"
	g.Expect(up.Update(ctx, bd)).To(Succeed())
	defer runAgentWith(t, deployBinary)()
	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(got.Status.AppliedDeploymentID).To(Equal(bd.Spec.DeploymentID))
		g.Expect(conditions.IsTrue(got, fleet.ConditionDeployed)).To(BeTrue(), "Deployed: %+v", conditions.Get(got, fleet.ConditionDeployed))
		g.Expect(summary.State(got)).NotTo(Equal(fleet.ErrApplied))
		g.Expect(lastRecord(ctx, g, key)).To(Equal(release.StatusDeployed))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the next agent to recover the release and deploy")
	g.Expect(down.Get(ctx, client.ObjectKey{Namespace: "killed", Name: "web"}, &corev1.ConfigMap{})).NotTo(Succeed(), "web is a Deployment, not a ConfigMap")
}
