package bundlediff

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func drifted(cluster string, m ...fleet.ModifiedStatus) fleet.BundleDeployment {
	return fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-" + cluster, Name: "app", Labels: map[string]string{
			fleet.BundleNameLabel: "app", fleet.BundleNamespaceLabel: "fleet-default", fleet.ClusterLabel: cluster, fleet.ClusterNamespaceLabel: "fleet-default"}},
		Status: fleet.BundleDeploymentStatus{ModifiedStatus: m},
	}
}

func TestChangesArePointersToLeaves(t *testing.T) {
	g := NewWithT(t)
	c, err := Changes(`{"data":{"a/b":"1","k":"v"},"metadata":{"labels":{"x~y":"z"}},"spec":{"ports":[1,2]}}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c).To(Equal([]Change{{"/data/a~1b", "1"}, {"/data/k", "v"}, {"/metadata/labels/x~0y", "z"}, {"/spec/ports", []any{1.0, 2.0}}}))
	_, err = Changes(`{"data":`)
	g.Expect(err).To(MatchError(ContainSubstring(`patch "{\"data\":"`)))
}

func TestPrintAndComparePatches(t *testing.T) {
	g := NewWithT(t)
	bds := []fleet.BundleDeployment{
		drifted("a", fleet.ModifiedStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: "x", Name: "cm", Patch: `{"data":{"k":"v"}}`}),
		drifted("b", fleet.ModifiedStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: "x", Name: "cm", Patch: `{"data":{"j":"w"}}`},
			fleet.ModifiedStatus{APIVersion: "batch/v1", Kind: "Job", Namespace: "x", Name: "once", Create: true},
			fleet.ModifiedStatus{APIVersion: "v1", Kind: "Service", Namespace: "x", Name: "old", Delete: true}),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-c", Name: "app"}},
	}
	sel := Drifted(bds, Selector{Bundle: "app"})
	g.Expect(sel).To(HaveLen(2))
	g.Expect(Drifted(bds, Selector{Cluster: "b"})).To(HaveLen(1))
	var out bytes.Buffer
	g.Expect(Print(&out, sel)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("configmap.v1 x/cm: modified\n  /data/k: the bundle has \"v\"\n"))
	g.Expect(out.String()).To(ContainSubstring("job.batch x/once: missing"))
	g.Expect(out.String()).To(ContainSubstring("service.v1 x/old: extra"))
	p, err := ComparePatches(sel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(map[string][]fleet.ComparePatch{"fleet-default/app": {
		{APIVersion: "batch/v1", Kind: "Job", Namespace: "x", Name: "once", Operations: []fleet.Operation{{Op: "ignore"}}},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "x", Name: "cm", JSONPointers: []string{"/data/j", "/data/k"}},
	}}))
	out.Reset()
	g.Expect(PrintFleetYAML(&out, p)).To(Succeed())
	var back struct {
		Diff fleet.DiffOptions `json:"diff"`
	}
	g.Expect(yaml.UnmarshalStrict(out.Bytes(), &back)).To(Succeed())
	g.Expect(back.Diff.ComparePatches).To(Equal(p["fleet-default/app"]))
}
