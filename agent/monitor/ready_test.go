package monitor

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestReadiness(t *testing.T) {
	cases := []struct {
		name   string
		obj    string
		ignore []map[string]string
		ready  bool
		why    string
	}{
		{name: "deployment without status", ready: false, why: "generation 1 not observed yet", obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, generation: 1}
spec: {replicas: 1}`},
		{name: "deployment not available", ready: false, why: "0/1 available", obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, generation: 1}
spec: {replicas: 1}
status: {observedGeneration: 1, replicas: 1, updatedReplicas: 1}`},
		{name: "deployment available", ready: true, obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, generation: 2}
spec: {replicas: 2}
status:
  observedGeneration: 2
  replicas: 2
  updatedReplicas: 2
  availableReplicas: 2
  conditions: [{type: Available, status: "True"}]`},
		{name: "deployment with old replicas left", ready: false, why: "1 old replicas pending termination", obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, generation: 2}
spec: {replicas: 2}
status:
  observedGeneration: 2
  replicas: 3
  updatedReplicas: 2
  availableReplicas: 2
  conditions: [{type: Available, status: "True"}]`},
		{name: "deployment with old generation observed", ready: false, why: "generation 3 not observed yet", obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, generation: 3}
spec: {replicas: 1}
status: {observedGeneration: 2, updatedReplicas: 1, availableReplicas: 1, conditions: [{type: Available, status: "True"}]}`},
		{name: "deployment replicas default to 1", ready: false, why: "0/1 updated", obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, generation: 1}
status: {observedGeneration: 1}`},
		{name: "deployment Available False", ready: false, why: "Available=False (MinimumReplicasUnavailable): too few", obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, generation: 1}
spec: {replicas: 1}
status:
  observedGeneration: 1
  updatedReplicas: 1
  availableReplicas: 1
  conditions: [{type: Available, status: "False", reason: MinimumReplicasUnavailable, message: too few}]`},
		{name: "deployment Available False ignored", ready: true,
			ignore: []map[string]string{{"type": "Available", "status": "False"}}, obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, generation: 1}
spec: {replicas: 1}
status:
  observedGeneration: 1
  updatedReplicas: 1
  availableReplicas: 1
  conditions: [{type: Available, status: "False"}]`},
		{name: "statefulset not ready", ready: false, why: "0/3 ready", obj: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, generation: 1}
spec: {replicas: 3}
status: {observedGeneration: 1, readyReplicas: 0}`},
		{name: "statefulset rolling out", ready: false, why: "rolling out revision db-2 (current db-1)", obj: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, generation: 2}
spec: {replicas: 1}
status: {observedGeneration: 2, readyReplicas: 1, updatedReplicas: 1, currentRevision: db-1, updateRevision: db-2}`},
		{name: "statefulset ready", ready: true, obj: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, generation: 2}
spec: {replicas: 1}
status: {observedGeneration: 2, readyReplicas: 1, updatedReplicas: 1, currentRevision: db-2, updateRevision: db-2}`},
		{name: "job running", ready: false, why: "not complete", obj: `
apiVersion: batch/v1
kind: Job
metadata: {name: migrate}
status: {active: 1}`},
		{name: "job complete", ready: true, obj: `
apiVersion: batch/v1
kind: Job
metadata: {name: migrate}
status: {conditions: [{type: Complete, status: "True"}]}`},
		{name: "generic Ready False", ready: false, why: "Ready=False (Waiting): certificate pending", obj: `
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: tls}
status: {conditions: [{type: Ready, status: "False", reason: Waiting, message: certificate pending}]}`},
		{name: "generic Ready False ignored", ready: true, ignore: []map[string]string{{"type": "Ready"}}, obj: `
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: tls}
status: {conditions: [{type: Ready, status: "False"}]}`},
		{name: "object without status", ready: true, obj: `
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {a: b}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ready, why := Readiness(obj(t, tc.obj), tc.ignore)
			g.Expect(ready).To(Equal(tc.ready))
			g.Expect(why).To(Equal(tc.why))
		})
	}
}

func TestSummarize(t *testing.T) {
	cases := []struct {
		name string
		obj  string
		why  string
		want fleet.Summary
	}{
		{name: "failed job is an error", why: "Failed=True (BackoffLimitExceeded)", obj: `
apiVersion: batch/v1
kind: Job
metadata: {name: j}
status: {conditions: [{type: Failed, status: "True", reason: BackoffLimitExceeded}]}
`, want: fleet.Summary{State: StateError, Error: true, Message: []string{"Failed=True (BackoffLimitExceeded)"}}},
		{name: "running job is in progress", why: "not complete", obj: `
apiVersion: batch/v1
kind: Job
metadata: {name: j}
`, want: fleet.Summary{State: StateInProgress, Transitioning: true, Message: []string{"not complete"}}},
		{name: "deployment past its deadline is an error", why: "Progressing=False (ProgressDeadlineExceeded)", obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
status: {conditions: [{type: Progressing, status: "False", reason: ProgressDeadlineExceeded}]}
`, want: fleet.Summary{State: StateError, Error: true, Message: []string{"Progressing=False (ProgressDeadlineExceeded)"}}},
		{name: "rolling deployment is updating", why: "0/1 available", obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
`, want: fleet.Summary{State: StateUpdating, Transitioning: true, Message: []string{"0/1 available"}}},
		{name: "pending claim is in progress", why: "phase Pending", obj: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: p}
`, want: fleet.Summary{State: StateInProgress, Transitioning: true, Message: []string{"phase Pending"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Summarize(obj(t, tc.obj), tc.why, nil)).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	long := Summarize(obj(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"), strings.Repeat("x", 2000), nil)
	g.Expect(long.Message).To(HaveLen(1))
	g.Expect(len(long.Message[0])).To(BeNumerically("<=", maxMessageLen+3), "a long message is cut")
}
