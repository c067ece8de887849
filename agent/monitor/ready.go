package monitor

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Readiness tells whether a live object is ready and, if not, why (e.g.
// "0/1 available"). Conditions matching an entry of ignore (every key of the
// entry has the listed value) do not count.
func Readiness(o *unstructured.Unstructured, ignore []map[string]string) (bool, string) {
	gk := o.GroupVersionKind().GroupKind()
	var ready = true
	var why string
	switch gk.String() {
	case "Deployment.apps":
		ready, why = deploymentReady(o, ignore)
	case "StatefulSet.apps":
		ready, why = statefulSetReady(o)
	case "DaemonSet.apps":
		ready, why = daemonSetReady(o)
	case "Job.batch":
		ready, why = jobReady(o, ignore)
	case "PersistentVolumeClaim":
		if phase, _, _ := unstructured.NestedString(o.Object, "status", "phase"); phase != "Bound" {
			ready, why = false, "phase "+orDefault(phase, "Pending")
		}
	}
	if !ready {
		return false, why
	}
	if c := findCondition(o, "Ready", ignore); c != nil && c["status"] == "False" {
		return false, conditionMessage("Ready", c)
	}
	return true, ""
}

// Summary states of a not-ready object, the words Fleet's agent uses.
const (
	// StateError: the object failed and will not become ready by itself.
	StateError = "error"
	// StateUpdating: a workload is rolling out.
	StateUpdating = "updating"
	// StateInProgress: anything else on its way to ready.
	StateInProgress = "in-progress"
)

// maxMessageLen bounds the message of a summary: a condition message can be
// long, and ten of them go into every status that carries the object.
const maxMessageLen = 512

// Summarize is the Fleet-shaped summary of a not-ready object, given why
// Readiness says it is not ready: an error when the object failed (a Job
// that failed, a Deployment past its progress deadline), else updating for
// a rolling workload and in-progress for anything else.
func Summarize(o *unstructured.Unstructured, why string, ignore []map[string]string) fleet.Summary {
	if len(why) > maxMessageLen {
		why = strings.ToValidUTF8(why[:maxMessageLen], "") + "..."
	}
	s := fleet.Summary{State: StateInProgress, Transitioning: true}
	if why != "" {
		s.Message = []string{why}
	}
	switch gk := o.GroupVersionKind().GroupKind(); gk.String() {
	case "Job.batch":
		if c := findCondition(o, "Failed", ignore); c != nil && c["status"] == "True" {
			s.State, s.Error, s.Transitioning = StateError, true, false
		}
	case "Deployment.apps":
		if c := findCondition(o, "Progressing", ignore); c != nil && c["reason"] == "ProgressDeadlineExceeded" {
			s.State, s.Error, s.Transitioning = StateError, true, false
		} else {
			s.State = StateUpdating
		}
	case "StatefulSet.apps", "DaemonSet.apps":
		s.State = StateUpdating
	}
	return s
}

func deploymentReady(o *unstructured.Unstructured, ignore []map[string]string) (bool, string) {
	if ok, why := generationObserved(o); !ok {
		return false, why
	}
	if paused, _, _ := unstructured.NestedBool(o.Object, "spec", "paused"); paused {
		return true, ""
	}
	replicas := specReplicas(o)
	updated := statusInt(o, "updatedReplicas")
	available := statusInt(o, "availableReplicas")
	if c := findCondition(o, "Progressing", ignore); c != nil && c["reason"] == "ProgressDeadlineExceeded" {
		return false, conditionMessage("Progressing", c)
	}
	switch {
	case updated < replicas:
		return false, fmt.Sprintf("%d/%d updated", updated, replicas)
	case statusInt(o, "replicas") > updated:
		// Old ReplicaSets still have pods: the rollout is not done, even
		// when enough of them are available (kubectl rollout status waits
		// for them too). A new image that cannot start stalls here.
		return false, fmt.Sprintf("%d old replicas pending termination", statusInt(o, "replicas")-updated)
	case available < replicas:
		return false, fmt.Sprintf("%d/%d available", available, replicas)
	}
	if replicas > 0 {
		switch c, present := condition(o, "Available", ignore); {
		case !present:
			return false, fmt.Sprintf("%d/%d available, no Available condition yet", available, replicas)
		case c != nil && c["status"] != "True":
			return false, conditionMessage("Available", c)
		}
	}
	return true, ""
}

func statefulSetReady(o *unstructured.Unstructured) (bool, string) {
	if ok, why := generationObserved(o); !ok {
		return false, why
	}
	replicas := specReplicas(o)
	if ready := statusInt(o, "readyReplicas"); ready < replicas {
		return false, fmt.Sprintf("%d/%d ready", ready, replicas)
	}
	if t, _, _ := unstructured.NestedString(o.Object, "spec", "updateStrategy", "type"); t == "OnDelete" {
		return true, ""
	}
	partition, _ := nestedInt(o, "spec", "updateStrategy", "rollingUpdate", "partition")
	if updated := statusInt(o, "updatedReplicas"); updated < replicas-partition {
		return false, fmt.Sprintf("%d/%d updated", updated, replicas-partition)
	}
	current, _, _ := unstructured.NestedString(o.Object, "status", "currentRevision")
	update, _, _ := unstructured.NestedString(o.Object, "status", "updateRevision")
	if partition == 0 && current != update {
		return false, fmt.Sprintf("rolling out revision %s (current %s)", update, current)
	}
	return true, ""
}

func daemonSetReady(o *unstructured.Unstructured) (bool, string) {
	if ok, why := generationObserved(o); !ok {
		return false, why
	}
	desired := statusInt(o, "desiredNumberScheduled")
	if updated := statusInt(o, "updatedNumberScheduled"); updated < desired {
		return false, fmt.Sprintf("%d/%d updated", updated, desired)
	}
	if available := statusInt(o, "numberAvailable"); available < desired {
		return false, fmt.Sprintf("%d/%d available", available, desired)
	}
	return true, ""
}

func jobReady(o *unstructured.Unstructured, ignore []map[string]string) (bool, string) {
	if c := findCondition(o, "Failed", ignore); c != nil && c["status"] == "True" {
		return false, conditionMessage("Failed", c)
	}
	if c := findCondition(o, "Complete", ignore); c != nil && c["status"] == "True" {
		return true, ""
	}
	return false, "not complete"
}

func generationObserved(o *unstructured.Unstructured) (bool, string) {
	observed, found := nestedInt(o, "status", "observedGeneration")
	generation, _ := nestedInt(o, "metadata", "generation")
	if !found || observed < generation {
		return false, fmt.Sprintf("generation %d not observed yet", generation)
	}
	return true, ""
}

func specReplicas(o *unstructured.Unstructured) int64 {
	r, found := nestedInt(o, "spec", "replicas")
	if !found {
		return 1
	}
	return r
}

func statusInt(o *unstructured.Unstructured, field string) int64 {
	v, _ := nestedInt(o, "status", field)
	return v
}

// nestedInt reads an integer field, whether decoded as int64 (from the API
// server) or float64 (from plain JSON or YAML).
func nestedInt(o *unstructured.Unstructured, fields ...string) (int64, bool) {
	v, found, _ := unstructured.NestedFieldNoCopy(o.Object, fields...)
	if !found {
		return 0, false
	}
	if f, ok := number(v); ok {
		return int64(f), true
	}
	return 0, false
}

// findCondition returns status.conditions[type=t], nil when absent or
// ignored.
func findCondition(o *unstructured.Unstructured, t string, ignore []map[string]string) map[string]interface{} {
	c, _ := condition(o, t, ignore)
	return c
}

// condition returns status.conditions[type=t] and whether it is present; an
// ignored condition is present but returned as nil.
func condition(o *unstructured.Unstructured, t string, ignore []map[string]string) (map[string]interface{}, bool) {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]interface{})
		if !ok || m["type"] != t {
			continue
		}
		if ignored(m, ignore) {
			return nil, true
		}
		return m, true
	}
	return nil, false
}

// ignored tells whether some entry of ignore matches the condition: every
// key of the entry has the same value in the condition.
func ignored(cond map[string]interface{}, ignore []map[string]string) bool {
	for _, entry := range ignore {
		if len(entry) == 0 {
			continue
		}
		match := true
		for k, v := range entry {
			if fmt.Sprint(cond[k]) != v {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

func conditionMessage(t string, c map[string]interface{}) string {
	msg := fmt.Sprintf("%s=%v", t, c["status"])
	if r, _ := c["reason"].(string); r != "" {
		msg += " (" + r + ")"
	}
	if m, _ := c["message"].(string); m != "" {
		msg += ": " + m
	}
	return msg
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
