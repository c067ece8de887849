package outcome

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// fieldPatch makes the patch of the whole encodings, field by field: every
// pair of statuses below, both ways, gives the same merge patch as
// jsonpatch.CreateMergePatch of the two encoded statuses.
func TestFieldPatchIsTheMergePatchOfTheWholeStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC))
	cond := func(typ string, status metav1.ConditionStatus, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "R", Message: msg, LastTransitionTime: t0}
	}
	base := fleet.GitRepoStatus{
		ObservedGeneration: 2, Commit: "abc", LastPollingTriggered: t0, ReadyClusters: 1, DesiredReadyClusters: 2,
		Summary:                  fleet.BundleSummary{Ready: 1, DesiredReady: 2},
		Display:                  fleet.GitRepoDisplay{ReadyBundleDeployments: "1/2", State: "NotReady", Message: "waiting"},
		Conditions:               []metav1.Condition{cond("Ready", metav1.ConditionFalse, "waiting"), cond("GitPolling", metav1.ConditionTrue, "")},
		PerClusterResourceCounts: map[string]*fleet.ResourceCounts{"a/b": {Ready: 1}},
	}
	variants := map[string]func(s *fleet.GitRepoStatus){
		"same":                     func(*fleet.GitRepoStatus) {},
		"a new commit":             func(s *fleet.GitRepoStatus) { s.Commit = "def" },
		"the commit gone":          func(s *fleet.GitRepoStatus) { s.Commit = "" },
		"polled later":             func(s *fleet.GitRepoStatus) { s.LastPollingTriggered = metav1.NewTime(t0.Add(time.Minute)) },
		"never polled":             func(s *fleet.GitRepoStatus) { s.LastPollingTriggered = metav1.Time{} },
		"polled, the same instant": func(s *fleet.GitRepoStatus) { s.LastPollingTriggered = metav1.NewTime(t0.Local()) },
		"one display field":        func(s *fleet.GitRepoStatus) { s.Display.State = "Ready" },
		"a display field gone":     func(s *fleet.GitRepoStatus) { s.Display.Message = "" },
		"the display empty":        func(s *fleet.GitRepoStatus) { s.Display = fleet.GitRepoDisplay{} },
		"a condition changed":      func(s *fleet.GitRepoStatus) { s.Conditions[0].Message = "ready" },
		"no conditions":            func(s *fleet.GitRepoStatus) { s.Conditions = nil },
		"an empty list of them":    func(s *fleet.GitRepoStatus) { s.Conditions = []metav1.Condition{} },
		"a cluster's counts":       func(s *fleet.GitRepoStatus) { s.PerClusterResourceCounts["a/b"].Ready = 2 },
		"another cluster":          func(s *fleet.GitRepoStatus) { s.PerClusterResourceCounts["c/d"] = &fleet.ResourceCounts{Modified: 1} },
		"a nil cluster entry":      func(s *fleet.GitRepoStatus) { s.PerClusterResourceCounts["a/b"] = nil },
		"no clusters":              func(s *fleet.GitRepoStatus) { s.PerClusterResourceCounts = nil },
		"resources":                func(s *fleet.GitRepoStatus) { s.Resources = []fleet.GitRepoResource{{Kind: "ConfigMap", Name: "x"}} },
		"counts and summary at once": func(s *fleet.GitRepoStatus) {
			s.ResourceCounts.Ready, s.Summary.Ready, s.ReadyClusters, s.ObservedGeneration = 3, 2, 0, 3
		},
	}
	copyOf := func(s fleet.GitRepoStatus) fleet.GitRepoStatus {
		out := fleet.GitRepoStatus{}
		s.DeepCopyInto(&out)
		return out
	}
	for name, change := range variants {
		changed := copyOf(base)
		change(&changed)
		for _, pair := range [][2]fleet.GitRepoStatus{{copyOf(base), changed}, {changed, copyOf(base)}} {
			b, o := pair[0], pair[1]
			got, ok, err := fieldPatch(reflect.ValueOf(&b).Elem(), reflect.ValueOf(&o).Elem())
			if err != nil || !ok {
				t.Fatalf("%s: fieldPatch: ok %v, %v", name, ok, err)
			}
			bj, err := json.Marshal(&b)
			if err != nil {
				t.Fatal(err)
			}
			oj, err := json.Marshal(&o)
			if err != nil {
				t.Fatal(err)
			}
			want, err := jsonpatch.CreateMergePatch(bj, oj)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonpatch.Equal(got, want) {
				t.Errorf("%s: fieldPatch = %s, the whole statuses' merge patch = %s", name, got, want)
			}
		}
	}
}

// A struct fieldPatch does not handle is left to the whole encodings.
func TestFieldPatchLeavesInlineFieldsToTheWholeEncodings(t *testing.T) {
	type inner struct {
		A string `json:"a"`
	}
	type embedded struct {
		inner `json:",inline"`
		B     string `json:"b"`
	}
	type untagged struct{ A string }
	for name, v := range map[string]any{"embedded": &embedded{}, "untagged": &untagged{}} {
		e := reflect.ValueOf(v).Elem()
		if _, ok, _ := fieldPatch(e, e); ok {
			t.Errorf("%s: handled field by field", name)
		}
	}
}
