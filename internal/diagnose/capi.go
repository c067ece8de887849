package diagnose

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/capienroll"
)

// capiNotEnrolled finds Cluster API clusters whose control plane is
// initialized and whose fleet agent has not checked in (FleetAgentReady
// not True) for longer than StuckAfter, and says why, as the dashboard's
// Cluster API page does. A control plane not initialized yet is not a
// finding (the enrolment waits for it), nor is a cluster opted out or
// un-enrolled by a person.
func capiNotEnrolled(s *Snapshot, o Options) []Finding {
	fleets := map[string]*fleet.Cluster{}
	for i := range s.Clusters {
		fleets[s.Clusters[i].Namespace+"/"+s.Clusters[i].Name] = &s.Clusters[i]
	}
	var out []Finding
	for i := range s.CAPIClusters {
		c := &s.CAPIClusters[i]
		if !capienroll.Initialized(c) || capienroll.Enrolled(c) || capienroll.OptedOut(c) {
			continue
		}
		t := notEnrolledSince(c)
		if s.Taken.Sub(t) <= o.StuckAfter {
			continue
		}
		msg := fmt.Sprintf("its control plane is initialized (phase %s), and it has not been enrolled for %s: %s",
			orNone(c.Status.Phase), s.Taken.Sub(t).Round(time.Second), capienroll.WhyNot(c))
		if fc := fleets[c.Namespace+"/"+c.Name]; fc != nil && capienroll.EnrolledFrom(fc, c) {
			msg += " (fleet Cluster " + fc.Namespace + "/" + fc.Name + ")"
		}
		sev, action := capiAction(c)
		out = append(out, Finding{Check: CheckCAPINotEnrolled, Severity: sev, Object: object("Cluster.cluster.x-k8s.io", c.Namespace, c.Name),
			Message: msg, Action: action})
	}
	return out
}

// notEnrolledSince is when c's enrolment last stood still: the later of
// FleetAgentReady's and ControlPlaneInitialized's last transitions, else
// its creation.
func notEnrolledSince(c *clusterv1.Cluster) time.Time {
	t := c.CreationTimestamp.Time
	for _, typ := range []string{capienroll.ConditionFleetAgentReady, clusterv1.ClusterControlPlaneInitializedCondition} {
		if cond := meta.FindStatusCondition(c.Status.Conditions, typ); cond != nil && cond.LastTransitionTime.After(t) {
			t = cond.LastTransitionTime.Time
		}
	}
	return t
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// capiAction is a finding's severity and what to do, from why c is not
// enrolled.
func capiAction(c *clusterv1.Cluster) (Severity, string) {
	cond := capienroll.Condition(c)
	reason := ""
	if cond != nil {
		reason = cond.Reason
	}
	switch {
	case !c.DeletionTimestamp.IsZero():
		return Info, "nothing, unless its deletion hangs: then see the finalizers on it and its fleet Cluster"
	case capienroll.Paused(c):
		return Info, "resume it (spec.paused false, no cluster.x-k8s.io/paused annotation) once what paused it (a clusterctl move, maintenance) is done"
	case reason == fleet.ReasonFailed:
		return Critical, "fix what the message names (the kubeconfig Secret, the enrolment's annotations or ClusterClass variables, an identity conflict); " +
			"the enrolment is retried"
	case reason == fleet.ReasonWaitingForControlPlane:
		return Warning, "Cluster API writes the Secret " + c.Name + "-kubeconfig in namespace " + c.Namespace +
			" once the control plane is up: check the control plane provider and that the Secret exists"
	case reason == fleet.ReasonAgentSilent:
		return Warning, "check the agent's pod downstream and its connection to the manager (see agent-offline for its fleet Cluster)"
	case reason != "":
		return Warning, "see the fleet Cluster's Imported condition (cluster-not-imported) and the manager's log for this cluster"
	}
	return Warning, "is the manager running with Cluster API enrolment on, and do its opt-in selectors (--capi-cluster-selector, " +
		"--capi-namespace-selector) and the namespace's " + capienroll.EnrollLabel + " label let it in?"
}
