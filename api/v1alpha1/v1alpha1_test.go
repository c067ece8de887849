package v1alpha1

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func TestGenericMapRoundTrip(t *testing.T) {
	g := NewWithT(t)

	in := []byte(`{"helm":{"values":{"replicas":2,"image":{"tag":"1.27"},"hosts":["a","b"]}}}`)
	var opts BundleDeploymentOptions
	g.Expect(json.Unmarshal(in, &opts)).To(Succeed())
	g.Expect(opts.Helm.Values.Data).To(HaveKeyWithValue("replicas", float64(2)))

	out, err := json.Marshal(opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchJSON(in), "values marshal as the bare map and an empty ignore is left out")

	cp := opts.DeepCopy()
	cp.Helm.Values.Data["image"].(map[string]interface{})["tag"] = "changed"
	g.Expect(opts.Helm.Values.Data["image"]).To(HaveKeyWithValue("tag", "1.27"), "the copy shares nothing")

	var empty GenericMap
	g.Expect(empty.DeepCopy().Data).To(BeNil())
	g.Expect((*GenericMap)(nil).DeepCopy()).To(BeNil())
}

// TestSamples decodes every sample strictly into its Go type and checks that
// nothing is lost on the way back, so that the samples, the Go types and the
// JSON names stay in step.
func TestSamples(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			g := NewWithT(t)
			data, err := os.ReadFile(file)
			g.Expect(err).NotTo(HaveOccurred())

			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			g.Expect(yaml.Unmarshal(data, &meta)).To(Succeed())
			g.Expect(meta.APIVersion).To(Equal(GroupVersion.String()))
			kinds[meta.Kind] = true

			obj, err := scheme.New(GroupVersion.WithKind(meta.Kind))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(yaml.UnmarshalStrict(data, obj)).To(Succeed())

			var want, got interface{}
			g.Expect(yaml.Unmarshal(data, &want)).To(Succeed())
			out, err := json.Marshal(obj)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(json.Unmarshal(out, &got)).To(Succeed())
			g.Expect(lost(want, got, "")).To(BeEmpty(), "sample values lost or changed by the Go types")
		})
	}
	NewWithT(t).Expect(kinds).To(HaveLen(10), "one sample per kind")
}

// lost lists the paths of the values in want that got lacks or holds
// differently. Durations compare by value ("12h" is "12h0m0s").
func lost(want, got interface{}, path string) []string {
	switch w := want.(type) {
	case map[string]interface{}:
		gm, ok := got.(map[string]interface{})
		if !ok {
			return []string{path}
		}
		var out []string
		for k, v := range w {
			out = append(out, lost(v, gm[k], path+"."+k)...)
		}
		return out
	case []interface{}:
		gs, ok := got.([]interface{})
		if !ok || len(gs) != len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, lost(w[i], gs[i], path+"["+strconv.Itoa(i)+"]")...)
		}
		return out
	case string:
		if gs, ok := got.(string); ok {
			wd, werr := time.ParseDuration(w)
			gd, gerr := time.ParseDuration(gs)
			if werr == nil && gerr == nil && wd == gd {
				return nil
			}
		}
	}
	if !reflect.DeepEqual(want, got) {
		return []string{path}
	}
	return nil
}

// TestStatusWireShapes: the status fields Fleet's UI and users' scripts read
// have Fleet's JSON names and shapes.
func TestStatusWireShapes(t *testing.T) {
	g := NewWithT(t)
	marshal := func(v any) string {
		out, err := json.Marshal(v)
		g.Expect(err).NotTo(HaveOccurred())
		return string(out)
	}
	g.Expect(marshal(NonReadyResource{Name: "c", State: NotReady, NonReadyStatus: []NonReadyStatus{{Kind: "Deployment", Name: "web",
		Summary: Summary{State: "updating", Transitioning: true, Message: []string{"0/1 available"}}}}})).To(MatchJSON(
		`{"name":"c","bundleState":"NotReady","nonReadyStatus":[{"kind":"Deployment","name":"web",
		  "summary":{"state":"updating","transitioning":true,"message":["0/1 available"]}}]}`))
	g.Expect(marshal(ResourceCounts{Ready: 1, DesiredReady: 1})).To(MatchJSON(
		`{"ready":1,"desiredReady":1,"waitApplied":0,"modified":0,"orphaned":0,"missing":0,"unknown":0,"notReady":0}`))
	g.Expect(marshal(GitRepoResource{APIVersion: "apps/v1", Kind: "Deployment", Type: "apps.deployment", ID: "ns/web", Namespace: "ns", Name: "web",
		State: "NotReady", PerClusterState: PerClusterState{Ready: []string{"ws/a"}, NotReady: []string{"ws/b"}}})).To(MatchJSON(
		`{"apiVersion":"apps/v1","kind":"Deployment","type":"apps.deployment","id":"ns/web","namespace":"ns","name":"web",
		  "state":"NotReady","perClusterState":{"ready":["ws/a"],"notReady":["ws/b"]}}`))
	g.Expect(Summary{State: "error", Error: true, Message: []string{"Failed=True"}}.String()).To(Equal("error: Failed=True"))
	g.Expect(Summary{State: "in-progress"}.String()).To(Equal("in-progress"))
}
