package bundledeployment

import (
	"fmt"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// BoundStatus cuts a BundleDeployment's status to the bounds of its schema
// (the fleet.MaxStatus* constants): the API server refuses a status beyond
// them, and a refused write would leave the old status in place. Lists keep
// their first entries (status.incompleteState says that some were left
// out; resourceCounts still counts every resource), strings keep their
// beginning and say how much was cut. A status within the bounds is left as
// it is.
func BoundStatus(st *fleet.BundleDeploymentStatus) {
	if len(st.Conditions) > fleet.MaxStatusConditions {
		st.Conditions = st.Conditions[:fleet.MaxStatusConditions]
	}
	for i := range st.Conditions {
		boundCondition(&st.Conditions[i])
	}
	st.AppliedDeploymentID = cut(st.AppliedDeploymentID, fleet.MaxStatusShortLength)
	st.Release = cut(st.Release, fleet.MaxStatusShortLength)
	st.Display.Deployed = cut(st.Display.Deployed, fleet.MaxStatusMessageLength)
	st.Display.Monitored = cut(st.Display.Monitored, fleet.MaxStatusMessageLength)
	st.Display.State = cut(st.Display.State, fleet.MaxStatusShortLength)
	if len(st.Resources) > fleet.MaxStatusResources {
		st.Resources, st.IncompleteState = st.Resources[:fleet.MaxStatusResources], true
	}
	for i := range st.Resources {
		r := &st.Resources[i]
		r.Kind, r.APIVersion, r.Namespace, r.Name = boundRef(r.Kind, r.APIVersion, r.Namespace, r.Name)
	}
	if len(st.NonReadyStatus) > fleet.MaxStatusEntries {
		st.NonReadyStatus, st.IncompleteState = st.NonReadyStatus[:fleet.MaxStatusEntries], true
	}
	for i := range st.NonReadyStatus {
		boundNonReady(&st.NonReadyStatus[i])
	}
	if len(st.ModifiedStatus) > fleet.MaxStatusEntries {
		st.ModifiedStatus, st.IncompleteState = st.ModifiedStatus[:fleet.MaxStatusEntries], true
	}
	for i := range st.ModifiedStatus {
		m := &st.ModifiedStatus[i]
		m.Kind, m.APIVersion, m.Namespace, m.Name = boundRef(m.Kind, m.APIVersion, m.Namespace, m.Name)
		m.Patch = cut(m.Patch, fleet.MaxStatusPatchLength)
	}
}

func boundCondition(c *metav1.Condition) {
	c.Message = cut(c.Message, fleet.MaxStatusMessageLength)
}

func boundNonReady(n *fleet.NonReadyStatus) {
	n.UID = types.UID(cut(string(n.UID), fleet.MaxStatusShortLength))
	n.Kind, n.APIVersion, n.Namespace, n.Name = boundRef(n.Kind, n.APIVersion, n.Namespace, n.Name)
	n.Summary.State = cut(n.Summary.State, fleet.MaxStatusShortLength)
	if msgs := n.Summary.Message; len(msgs) > fleet.MaxSummaryMessages {
		kept := fleet.MaxSummaryMessages - 1
		n.Summary.Message = append(msgs[:kept:kept], fmt.Sprintf("... and %d more", len(msgs)-kept))
	}
	for i, m := range n.Summary.Message {
		n.Summary.Message[i] = cut(m, fleet.MaxSummaryMessageLength)
	}
}

// boundRef cuts the kind, apiVersion, namespace and name of a resource.
func boundRef(kind, apiVersion, namespace, name string) (string, string, string, string) {
	return cut(kind, fleet.MaxStatusShortLength), cut(apiVersion, fleet.MaxAPIVersionLength),
		cut(namespace, fleet.MaxNamespaceLength), cut(name, fleet.MaxNameLength)
}

// cut returns s when it is at most limit bytes long, else its beginning, cut
// at a character's boundary, followed by how many bytes were left out, in
// limit bytes at most.
func cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	keep := limit - len(fmt.Sprintf(" ... (%d more bytes)", len(s)))
	if keep < 0 {
		// Too short a bound to say what was cut.
		keep = limit
		for keep > 0 && !utf8.RuneStart(s[keep]) {
			keep--
		}
		return s[:keep]
	}
	more := len(s) - keep
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return fmt.Sprintf("%s ... (%d more bytes)", s[:keep], more)
}
