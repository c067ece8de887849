package ocistorage_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/internal/target"
)

// chartFiles is a chart of n templates of size bytes each, half of each
// random (base64 of random bytes: what compresses as a packaged chart's
// CRDs and dashboards do, poorly) and half repetitive.
func chartFiles(n, size int) []fleet.BundleResource {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]fleet.BundleResource, 0, n)
	for i := range n {
		raw := make([]byte, size/2*3/4)
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		text := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t" + fmt.Sprint(i) + "\ndata:\n  random: " +
			base64.StdEncoding.EncodeToString(raw) + "\n  filler: \""
		for len(text) < size {
			text += "abcdefgh"
		}
		r, err := content.EncodeResource(fmt.Sprintf("chart/templates/t%d.yaml", i), []byte(text+"\"\n"))
		if err != nil {
			panic(err)
		}
		out = append(out, r)
	}
	return out
}

func jsonSize(g Gomega, obj any) int {
	b, err := json.Marshal(obj)
	g.Expect(err).NotTo(HaveOccurred())
	return len(b)
}

// TestStoredBytes reports what a bundle costs in the API server's storage
// with its content in a Content and in OCI storage: the JSON of the Bundle,
// the Content, one BundleDeployment and one agent Secret, as the API server
// stores custom resources (JSON; a Secret is stored as protobuf, a little
// smaller than the JSON counted here). Object metadata the API server adds
// (managedFields, uid, timestamps; some 300-600 bytes) is left out of both.
// Run with -v to see the table.
func TestStoredBytes(t *testing.T) {
	g := NewWithT(t)
	for _, sz := range []struct{ files, size int }{{10, 4 << 10}, {40, 16 << 10}, {60, 32 << 10}} {
		resources := chartFiles(sz.files, sz.size)
		raw, name, err := content.Marshal(resources)
		g.Expect(err).NotTo(HaveOccurred())
		_, build, err := content.Encode(resources)
		g.Expect(err).NotTo(HaveOccurred())
		c, err := build()
		g.Expect(err).NotTo(HaveOccurred())

		meta := metav1.ObjectMeta{Name: "app", Namespace: "fleet-default", Labels: map[string]string{fleet.RepoLabel: "repo"}}
		spec := fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "app",
			Helm: &fleet.HelmOptions{Chart: "chart", ReleaseName: "app"}}, Resources: resources,
			Targets: []fleet.BundleTarget{{Name: "all", ClusterGroup: "default"}}}
		etcdBundle := &fleet.Bundle{ObjectMeta: meta, Spec: spec}
		ociBundle := etcdBundle.DeepCopy()
		ociBundle.Spec.Resources, ociBundle.Spec.ContentsID = nil, content.ContentsID(raw)

		cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c-1", Namespace: "fleet-default"}}
		bdOf := func(b *fleet.Bundle, contentName string) *fleet.BundleDeployment {
			id, err := target.DeploymentID(contentName, b.Spec.BundleDeploymentOptions)
			g.Expect(err).NotTo(HaveOccurred())
			opts := b.Spec.BundleDeploymentOptions
			return target.BundleDeployment(b, contentName, &target.Deployment{Namespace: "cluster-fleet-default-c-1-0123456789ab",
				Cluster: cluster, ID: id, Options: &opts})
		}
		etcdBD, ociBD := bdOf(etcdBundle, name), bdOf(ociBundle, ociBundle.Spec.ContentsID)
		g.Expect(ociBD.Spec.OCIContents).To(BeTrue())
		sec := ocistorage.Options{Reference: "registry.example.com/fleet/fleet-default", AgentUsername: "reader", AgentPassword: "0123456789abcdef"}.AgentSecret(ociBD)
		secret := *sec

		eb, ec, ed := jsonSize(g, etcdBundle), jsonSize(g, c), jsonSize(g, etcdBD)
		ob, od, os := jsonSize(g, ociBundle), jsonSize(g, ociBD), jsonSize(g, &secret)
		t.Logf("chart %2d files x %3d KiB, manifest %5d KiB: in etcd: Bundle %7d B, Content %7d B, BundleDeployment %4d B | OCI storage: Bundle %4d B, BundleDeployment %4d B + agent Secret %3d B; per bundle %.0fx less, per cluster %+d B",
			sz.files, sz.size>>10, len(raw)>>10, eb, ec, ed, ob, od, os, float64(eb+ec)/float64(ob), od+os-ed)
		g.Expect(ob).To(BeNumerically("<", 1024))
		g.Expect(eb).To(BeNumerically(">", len(raw)/2))
	}
}
