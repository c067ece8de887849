package localcluster

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The stages given to kwok are Stage objects, every pod stage that lets a
// pod run leaves out the images that cannot be pulled, and the selectors
// name the prefix FailImagePrefix documents.
func TestStages(t *testing.T) {
	names := map[string]*unstructured.Unstructured{}
	for _, doc := range bytes.Split(kwokStages, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetAPIVersion() != "kwok.x-k8s.io/v1alpha1" || u.GetKind() != "Stage" {
			t.Fatalf("not a kwok Stage: %s %s", u.GetAPIVersion(), u.GetKind())
		}
		names[u.GetName()] = u
	}
	for _, want := range []string{"node-initialize", "node-heartbeat", "pod-ready", "pod-complete", "pod-image-pull-backoff", "pod-job-fail", "pod-delete"} {
		if names[want] == nil {
			t.Errorf("no stage %s", want)
		}
	}
	failing := `startswith("` + FailImagePrefix + `")`
	for name, op := range map[string]string{"pod-ready": "NotIn", "pod-image-pull-backoff": "In", "pod-job-fail": "In"} {
		exprs, _, _ := unstructured.NestedSlice(names[name].Object, "spec", "selector", "matchExpressions")
		found := false
		for _, e := range exprs {
			m := e.(map[string]interface{})
			if strings.Contains(m["key"].(string), failing) {
				found = m["operator"] == op
			}
		}
		if !found {
			t.Errorf("stage %s: no %s selector on images %s", name, op, failing)
		}
	}
}
