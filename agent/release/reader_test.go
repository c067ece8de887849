package release_test

import (
	"context"
	"encoding/base64"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/controlplane"
)

// helmRecord is a revision as Helm's SDK writes it, with the labels the
// deployer gives its releases.
func helmRecord(name, namespace, clusterNamespace string, version int, status helmrelease.Status) *helmrelease.Release {
	return &helmrelease.Release{
		Name: name, Namespace: namespace, Version: version,
		Info:     &helmrelease.Info{Status: status, Description: "revision " + string(status)},
		Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n",
		Chart: &chart.Chart{
			Metadata:  &chart.Metadata{Name: name, Version: "0.1.0", APIVersion: "v2", Annotations: map[string]string{fleet.DeploymentIDAnnotation: "s-1:abc"}},
			Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("kind: ConfigMap")}},
		},
		Config: map[string]any{"replicas": 1},
		Labels: map[string]string{fleet.ManagedLabel: "true", fleet.ClusterNamespaceLabel: clusterNamespace},
	}
}

// The reader finds and decodes the records Helm's own Secrets driver writes:
// the latest revision, the latest deployed one, and this agent's releases
// in every namespace, not another agent's.
func TestReaderReadsWhatHelmWrites(t *testing.T) {
	g := NewWithT(t)
	cp, err := controlplane.Start(controlplane.Options{Name: "release-reader", NoCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	ctx := context.Background()
	core, err := corev1client.NewForConfig(cp.Config)
	g.Expect(err).NotTo(HaveOccurred())
	for _, ns := range []string{"r1", "r2"} {
		_, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	r1 := driver.NewSecrets(core.Secrets("r1"))
	for v, st := range map[int]helmrelease.Status{1: helmrelease.StatusSuperseded, 2: helmrelease.StatusDeployed, 3: helmrelease.StatusFailed} {
		g.Expect(r1.Create("sh.helm.release.v1.app.v"+strconv.Itoa(v), helmRecord("app", "r1", "cluster-a", v, st))).To(Succeed())
	}
	r2 := driver.NewSecrets(core.Secrets("r2"))
	g.Expect(r2.Create("sh.helm.release.v1.mine.v1", helmRecord("mine", "r2", "cluster-a", 1, helmrelease.StatusPendingInstall))).To(Succeed())
	g.Expect(r2.Create("sh.helm.release.v1.theirs.v1", helmRecord("theirs", "r2", "cluster-b", 1, helmrelease.StatusDeployed))).To(Succeed())

	c, err := client.New(cp.Config, client.Options{Scheme: kinds.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	rd := release.Reader{Client: c}

	last, err := rd.Last(ctx, release.Key{Namespace: "r1", Name: "app"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(release.Display(last)).To(Equal("r1/app:3"))
	g.Expect(last.Status()).To(Equal(release.StatusFailed))
	g.Expect(last.Info.Description).To(Equal("revision failed"))
	g.Expect(last.Manifest).To(ContainSubstring("kind: ConfigMap"))
	g.Expect(release.Annotations(last)).To(HaveKeyWithValue(fleet.DeploymentIDAnnotation, "s-1:abc"))
	g.Expect(release.UpToDate(last, "s-1:abc")).To(BeFalse(), "a failed revision is not up to date")

	deployed, err := rd.Deployed(ctx, release.Key{Namespace: "r1", Name: "app"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(release.Display(deployed)).To(Equal("r1/app:2"))
	g.Expect(release.UpToDate(deployed, "s-1:abc")).To(BeTrue())

	none, err := rd.Last(ctx, release.Key{Namespace: "r1", Name: "missing"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeNil())
	pending, err := rd.Deployed(ctx, release.Key{Namespace: "r2", Name: "mine"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pending).To(BeNil(), "a release only pending has no deployed revision")

	owned, err := rd.Owned(ctx, "cluster-a")
	g.Expect(err).NotTo(HaveOccurred())
	names := make([]string, 0, len(owned))
	for _, r := range owned {
		names = append(names, release.Display(r)+" "+string(r.Status()))
	}
	g.Expect(names).To(ConsistOf("r1/app:3 failed", "r2/mine:1 pending-install"))
	g.Expect(owned[0].Status().IsPending() || owned[1].Status().IsPending()).To(BeTrue())
}

// Older Helm versions wrote the JSON without gzip; both decode.
func TestDecodeUncompressed(t *testing.T) {
	g := NewWithT(t)
	data := base64.StdEncoding.EncodeToString([]byte(`{"name":"a","namespace":"n","version":4,"info":{"status":"superseded"},"chart":{"metadata":{"annotations":{"k":"v"}}}}`))
	r, err := release.Decode([]byte(data))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(release.Display(r)).To(Equal("n/a:4"))
	g.Expect(r.Status()).To(Equal(release.StatusSuperseded))
	g.Expect(release.Annotations(r)).To(Equal(map[string]string{"k": "v"}))
	_, err = release.Decode([]byte("not base64!"))
	g.Expect(err).To(MatchError(ContainSubstring("decoding release record")))
}

func TestKeyOfABundleDeployment(t *testing.T) {
	g := NewWithT(t)
	g.Expect(release.For("app", fleet.BundleDeploymentOptions{})).To(Equal(release.Key{Namespace: "default", Name: "app"}))
	long := release.Name("a-very-long-bundle-deployment-name-that-goes-past-helms-limit-of-53")
	g.Expect(long).To(HaveLen(53))
}
