package monitor

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

const desiredDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: app
  labels: {app: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        resources: {limits: {cpu: 0.5, memory: 128Mi}}
`

// liveDeployment is desiredDeployment as the API server returns it: with
// server metadata, defaulted fields, normalized quantities and status.
const liveDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: app
  uid: 1234
  resourceVersion: "42"
  generation: 1
  creationTimestamp: "2024-01-01T00:00:00Z"
  labels: {app: web, app.kubernetes.io/managed-by: Helm}
  annotations: {meta.helm.sh/release-name: web}
  managedFields: [{manager: helm}]
spec:
  replicas: REPLICAS
  progressDeadlineSeconds: 600
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate}
  template:
    metadata: {labels: {app: web}}
    spec:
      restartPolicy: Always
      containers:
      - name: web
        image: IMAGE
        imagePullPolicy: IfNotPresent
        terminationMessagePath: /dev/termination-log
        resources: {limits: {cpu: 500m, memory: 128Mi}}
status: {replicas: 1}
`

func live(replicas, image string) string {
	return strings.NewReplacer("REPLICAS", replicas, "IMAGE", image).Replace(liveDeployment)
}

func TestDiff(t *testing.T) {
	cases := []struct {
		name    string
		desired string
		live    string
		patches []fleet.ComparePatch
		want    string
	}{
		{name: "defaults, server metadata and status are no drift", desired: desiredDeployment, live: live("1", "nginx:1.27")},
		{name: "changed replicas", desired: desiredDeployment, live: live("3", "nginx:1.27"), want: `{"spec":{"replicas":1}}`},
		{name: "changed image replaces the container list", desired: desiredDeployment, live: live("1", "nginx:latest"),
			want: `{"spec":{"template":{"spec":{"containers":[{"image":"nginx:1.27","name":"web","resources":{"limits":{"cpu":0.5,"memory":"128Mi"}}}]}}}}`},
		{name: "json pointer ignores replicas", desired: desiredDeployment, live: live("3", "nginx:1.27"),
			patches: []fleet.ComparePatch{{Kind: "Deployment", APIVersion: "apps/v1", Name: "web", Namespace: "app", JSONPointers: []string{"/spec/replicas"}}}},
		{name: "remove operation ignores replicas", desired: desiredDeployment, live: live("3", "nginx:1.27"),
			patches: []fleet.ComparePatch{{Kind: "Deployment", Name: "web", Operations: []fleet.Operation{{Op: "remove", Path: "/spec/replicas"}}}}},
		{name: "ignore operation ignores the whole object", desired: desiredDeployment, live: live("3", "nginx:latest"),
			patches: []fleet.ComparePatch{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "app", Name: "web", Operations: []fleet.Operation{{Op: "ignore"}}}}},
		{name: "ignore operation for another object does not apply", desired: desiredDeployment, live: live("3", "nginx:1.27"),
			patches: []fleet.ComparePatch{{Kind: "Deployment", Name: "other", Operations: []fleet.Operation{{Op: "ignore"}}}},
			want:    `{"spec":{"replicas":1}}`},
		{name: "patch for another object does not apply", desired: desiredDeployment, live: live("3", "nginx:1.27"),
			patches: []fleet.ComparePatch{{Kind: "Deployment", Name: "other", JSONPointers: []string{"/spec/replicas"}}},
			want:    `{"spec":{"replicas":1}}`},
		{name: "configmap data changed", desired: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {color: blue, size: \"1\"}\n",
			live: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, uid: x}\ndata: {color: red, size: \"1\", extra: kept}\n",
			want: `{"data":{"color":"blue"}}`},
		{name: "strings are not quantities outside resources", desired: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {num: \"1\"}\n",
			live: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {num: \"01\"}\n", want: `{"data":{"num":"1"}}`},
		{name: "empty map and false are like absent", desired: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, annotations: {}}\nimmutable: false\n",
			live: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			patch, err := Diff(obj(t, tc.desired), obj(t, tc.live), tc.patches)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.want == "" {
				g.Expect(patch).To(BeEmpty())
			} else {
				g.Expect(patch).To(MatchJSON(tc.want))
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	g := NewWithT(t)
	cm := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: app}\ndata: {a: b}\n")
	dep := obj(t, desiredDeployment)
	extra := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old, namespace: app}\n")

	// The ConfigMap is missing, the Deployment exists but is not available.
	res, err := Evaluate([]*unstructured.Unstructured{cm, dep},
		map[Key]*unstructured.Unstructured{KeyOf(dep): obj(t, live("1", "nginx:1.27"))},
		[]*unstructured.Unstructured{extra}, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Ready).To(BeFalse())
	g.Expect(res.NonModified).To(BeFalse())
	g.Expect(res.NonReady).To(HaveLen(1))
	g.Expect(res.NonReady[0].Summary).To(Equal(fleet.Summary{State: StateUpdating, Transitioning: true, Message: []string{"generation 1 not observed yet"}}))
	g.Expect(res.Incomplete).To(BeFalse())
	g.Expect(res.Modified).To(ConsistOf(
		fleet.ModifiedStatus{Kind: "ConfigMap", APIVersion: "v1", Namespace: "app", Name: "cm", Create: true},
		fleet.ModifiedStatus{Kind: "ConfigMap", APIVersion: "v1", Namespace: "app", Name: "old", Delete: true},
	))
	g.Expect(res.Counts).To(Equal(fleet.ResourceCounts{DesiredReady: 2, Missing: 1, NotReady: 1, Orphaned: 1}))
	g.Expect(res.ToApply).To(ConsistOf(cm))
	g.Expect(res.ToDelete).To(ConsistOf(extra))
	g.Expect(res.Resources).To(HaveLen(2))
}

// TestEvaluateIgnoreOperation: with Fleet's {"op": "ignore"} a missing or
// changed object is no drift and nothing is re-applied; its readiness still
// counts.
func TestEvaluateIgnoreOperation(t *testing.T) {
	g := NewWithT(t)
	job := obj(t, "apiVersion: batch/v1\nkind: Job\nmetadata: {name: init, namespace: app}\nspec: {template: {spec: {restartPolicy: Never}}}\n")
	cm := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: app}\ndata: {a: b}\n")
	changed := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: app}\ndata: {a: changed}\n")
	ignore := []fleet.Operation{{Op: "ignore"}}
	res, err := Evaluate([]*unstructured.Unstructured{job, cm}, map[Key]*unstructured.Unstructured{KeyOf(cm): changed}, nil,
		Options{Diff: &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{
			{APIVersion: "batch/v1", Kind: "Job", Namespace: "app", Name: "init", Operations: ignore},
			{Kind: "ConfigMap", Name: "cm", Operations: ignore},
		}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.NonModified).To(BeTrue())
	g.Expect(res.Ready).To(BeTrue())
	g.Expect(res.Modified).To(BeEmpty())
	g.Expect(res.ToApply).To(BeEmpty())
	g.Expect(res.Counts).To(Equal(fleet.ResourceCounts{DesiredReady: 2, Ready: 2}))
	g.Expect(res.Resources).To(HaveLen(2))
}

func TestDiffSecretStringData(t *testing.T) {
	g := NewWithT(t)
	desired := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]interface{}{"name": "s"},
		"stringData": map[string]interface{}{"token": "abc"},
	}}
	live := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]interface{}{"name": "s"},
		"data": map[string]interface{}{"token": "YWJj"}, "type": "Opaque",
	}}
	patch, err := Diff(desired, live, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(patch).To(BeEmpty(), "stringData is stored as data")
	live.Object["data"] = map[string]interface{}{"token": "eHl6"}
	patch, err = Diff(desired, live, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(patch).To(ContainSubstring("token"))
}

// TestEvaluateIncomplete: more not-ready or modified objects than
// MaxEntries are listed up to the bound, counted in full, and the result
// says it is incomplete.
func TestEvaluateIncomplete(t *testing.T) {
	g := NewWithT(t)
	desired := make([]*unstructured.Unstructured, 0, MaxEntries+2)
	for i := range MaxEntries + 2 {
		desired = append(desired, obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm%d, namespace: app}\n", i)))
	}
	res, err := Evaluate(desired, map[Key]*unstructured.Unstructured{}, nil, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Modified).To(HaveLen(MaxEntries))
	g.Expect(res.Counts.Missing).To(Equal(MaxEntries + 2))
	g.Expect(res.Incomplete).To(BeTrue())
}
