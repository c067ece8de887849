package agent

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/controlplane"
)

// UnenrollSpec deletes the Clusters of two token-registered clusters, whose
// agents the manager cannot reach: by default the releases stay running
// downstream (the agent is revoked before its deployments go, and it
// confirms a deployment is gone with the API server before uninstalling
// anything); with keep-resources-on-unenroll: "false" the agent uninstalls
// them before its credential is revoked. It brings up its own two
// downstream control planes.
func UnenrollSpec(ctx context.Context, inputGetter func() SpecInput) {
	f := &fixture{ctx: ctx}
	var keep, drop *cluster

	BeforeAll(func() {
		in := inputGetter()
		in.validate("UnenrollSpec")
		f.admin, f.upstream = in.Admin, in.Upstream
		downs, err := controlplane.StartN(2, "unenroll-down", controlplane.Options{NoCRDs: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			for _, cp := range downs {
				_ = cp.Stop()
			}
		})
		keep, drop = &cluster{ctx: ctx}, &cluster{ctx: ctx}
		keep.join(in, downs[0], nil, "unenroll=keep")
		drop.join(in, downs[1], nil, "unenroll=drop")
		DeferCleanup(func() { keep.StopAgents(); drop.StopAgents() })

		f.newBundle("unenroll-demo", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "unenroll-demo", CreateNamespace: ptr.To(true)},
			Resources: []fleet.BundleResource{res("cm.yaml",
				"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unenroll-demo\ndata:\n  greeting: hello\n")},
			Targets: []fleet.BundleTarget{{Name: "unenroll", ClusterSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "unenroll", Operator: metav1.LabelSelectorOpExists}}}}},
		})
		DeferCleanup(func() {
			_ = f.admin.Delete(ctx, &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "unenroll-demo"}})
		})
		keep.waitState("unenroll-demo", fleet.Ready, 90*time.Second)
		drop.waitState("unenroll-demo", fleet.Ready, 90*time.Second)
	})

	releases := func(j *cluster) int {
		list := &corev1.SecretList{}
		Expect(j.Local.List(ctx, list, client.InNamespace("unenroll-demo"), client.MatchingLabels{"owner": "helm"})).To(Succeed())
		return len(list.Items)
	}
	deleteCluster := func(j *cluster) {
		GinkgoHelper()
		Expect(f.admin.Delete(ctx, j.Cluster)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(f.admin.Get(ctx, client.ObjectKeyFromObject(j.Cluster), &fleet.Cluster{}))
		}, 90*time.Second, 250*time.Millisecond).Should(BeTrue(), "the Cluster %s is deleted", j.Cluster.Name)
	}

	It("keeps the releases of a deleted token-registered Cluster by default: its agent is revoked first", func() {
		uid := configMap(keep, "unenroll-demo", "unenroll-demo").UID
		Expect(releases(keep)).To(BeNumerically(">", 0))
		deleteCluster(keep)
		Eventually(func() bool {
			err := keep.CredClient().List(ctx, &fleet.BundleDeploymentList{}, client.InNamespace(keep.Cred.ClusterNamespace))
			return apierrors.IsUnauthorized(err)
		}, 30*time.Second, 250*time.Millisecond).Should(BeTrue(), "the agent's credential is refused")
		// The agent saw its deployments go (its watch may outlive the
		// credential) and had every chance to act on it.
		Consistently(func(g Gomega) {
			cm := configMap(keep, "unenroll-demo", "unenroll-demo")
			g.Expect(cm).NotTo(BeNil(), "the deployed ConfigMap stays\nagent log:\n%s", keep.Agent.Tail(3000))
			g.Expect(cm.UID).To(Equal(uid))
			g.Expect(releases(keep)).To(BeNumerically(">", 0), "the release record stays")
		}, 10*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	It("uninstalls them first when the Cluster says keep-resources-on-unenroll: \"false\"", func() {
		c := &fleet.Cluster{}
		Expect(f.admin.Get(ctx, client.ObjectKeyFromObject(drop.Cluster), c)).To(Succeed())
		patch := client.MergeFrom(c.DeepCopy())
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[fleet.KeepResourcesOnUnenrollAnnotation] = "false"
		Expect(f.admin.Patch(ctx, c, patch)).To(Succeed())
		drop.Cluster = c
		deleteCluster(drop)
		Expect(configMap(drop, "unenroll-demo", "unenroll-demo")).To(BeNil(), "uninstalled before the credential was revoked\nagent log:\n%s", drop.Agent.Tail(3000))
		Expect(releases(drop)).To(BeZero())
	})
}
