package bundledeployment

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitfleet/fleet/agent/monitor"
	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/summary"
)

// computeStatus sets the status fields the agent owns from what one
// reconcile saw: the release, the deploy error, the monitored objects.
// reconcileErr is the error the phases ended with; it matters only when the
// release could not even be looked up.
func computeStatus(s *scope, reconcileErr error) {
	bd := s.bd
	defer BoundStatus(&bd.Status)
	if s.state == nil {
		// The release could not be looked up (the agent's cluster is
		// unreachable): keep what is known, say why it is not current.
		if reconcileErr != nil {
			conditions.MarkFalse(bd, fleet.ConditionMonitored, outcome.ReasonOf(reconcileErr, fleet.ReasonError), reconcileErr.Error())
			setDisplay(bd)
		}
		return
	}
	deployed, last := s.state.deployed, s.state.last
	setRelease(&bd.Status, deployed)
	prevDeployed := conditions.Get(bd, fleet.ConditionDeployed)
	conditions.Set(bd, installedCondition(deployed, last))
	conditions.Set(bd, deployedCondition(bd.Spec, bd.Status.AppliedDeploymentID, prevDeployed, s.waiting, s.deployErr))
	if c, res := monitoredCondition(deployed != nil, s.monitored, s.monitorErr); c != nil {
		conditions.Set(bd, *c)
		if res != nil {
			applyMonitored(&bd.Status, res)
		}
	}
	conditions.Set(bd, readyCondition(bd.Spec, &bd.Status, s.waiting, s.deployErr))
	setDisplay(bd)
}

// setRelease records the deployed release: its name, the deploymentID it
// deploys and the forceSyncGeneration it was deployed for.
func setRelease(st *fleet.BundleDeploymentStatus, deployed *release.Release) {
	st.Release, st.AppliedDeploymentID = "", ""
	if deployed == nil {
		return
	}
	st.Release = release.Display(deployed)
	ann := release.Annotations(deployed)
	st.AppliedDeploymentID = ann[fleet.DeploymentIDAnnotation]
	if g, err := strconv.ParseInt(ann[fleet.SyncGenerationAnnotation], 10, 64); err == nil {
		st.SyncGeneration = &g
	}
}

func applyMonitored(st *fleet.BundleDeploymentStatus, r *monitor.Result) {
	st.Ready, st.NonModified = r.Ready, r.NonModified
	st.NonReadyStatus, st.ModifiedStatus = r.NonReady, r.Modified
	st.Resources, st.ResourceCounts = r.Resources, r.Counts
	st.IncompleteState = r.Incomplete
}

// installedCondition says whether a revision of the release is deployed, or
// why the latest one is not.
func installedCondition(deployed, last *release.Release) metav1.Condition {
	c := metav1.Condition{Type: fleet.ConditionInstalled}
	switch {
	case deployed != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, fleet.ReasonInstalled, "release "+release.Display(deployed)
	case last != nil && last.Info != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fleet.ReasonFailed,
			fmt.Sprintf("release %s is %s: %s", release.Display(last), last.Info.Status, last.Info.Description)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, fleet.ReasonNotInstalled
	}
	return c
}

// deployedCondition says whether the spec's deploymentID is applied. A
// failed deploy is False with the error's reason (fleet.ReasonError for a
// transient one); prev, the condition before this reconcile, is kept when
// this reconcile did not try again.
func deployedCondition(spec fleet.BundleDeploymentSpec, applied string, prev *metav1.Condition, waiting []string, deployErr error) metav1.Condition {
	c := metav1.Condition{Type: fleet.ConditionDeployed}
	switch {
	case deployErr != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, outcome.ReasonOf(deployErr, fleet.ReasonError), deployErr.Error()
	case applied == spec.DeploymentID:
		c.Status, c.Reason = metav1.ConditionTrue, fleet.ReasonDeployed
	case spec.Paused:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, fleet.ReasonPaused, "paused: changes are not deployed"
	case spec.OffSchedule:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, fleet.ReasonOffSchedule, offScheduleMessage(spec)
	case len(waiting) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, fleet.ReasonWaitingForDeps, waitingMessage(waiting)
	case prev != nil && prev.Status == metav1.ConditionFalse:
		// The last attempt failed and nothing changed since.
		c.Status, c.Reason, c.Message = prev.Status, prev.Reason, prev.Message
	default:
		c.Status, c.Reason = metav1.ConditionUnknown, fleet.ReasonDeploying
	}
	return c
}

// monitoredCondition says whether the deployed objects could be checked.
// It returns no condition when the monitor did not run although a release
// is deployed (a deploy failed first): what was known stays. The result,
// when not nil, is what to report of the objects.
func monitoredCondition(deployed bool, monitored *monitor.Result, monitorErr error) (*metav1.Condition, *monitor.Result) {
	switch {
	case monitored != nil:
		return &metav1.Condition{Type: fleet.ConditionMonitored, Status: metav1.ConditionTrue, Reason: fleet.ReasonMonitored}, monitored
	case monitorErr != nil:
		return &metav1.Condition{Type: fleet.ConditionMonitored, Status: metav1.ConditionFalse,
			Reason: outcome.ReasonOf(monitorErr, fleet.ReasonError), Message: monitorErr.Error()}, nil
	case !deployed:
		return &metav1.Condition{Type: fleet.ConditionMonitored, Status: metav1.ConditionUnknown,
			Reason: fleet.ReasonNothingToMonitor, Message: "nothing is deployed yet"}, &monitor.Result{}
	}
	return nil, nil
}

// offScheduleMessage says what waits for the cluster's deployment window.
func offScheduleMessage(spec fleet.BundleDeploymentSpec) string {
	return "outside the cluster's deployment window: deploymentID " + spec.DeploymentID + " waits for the next window"
}

func waitingMessage(waiting []string) string {
	return "waiting for " + strings.Join(waiting, ", ")
}

// readyCondition sums the deployment up, from the status fields already
// computed: True only when the spec's deploymentID is applied and every
// object is ready and unmodified.
func readyCondition(spec fleet.BundleDeploymentSpec, st *fleet.BundleDeploymentStatus, waiting []string, deployErr error) metav1.Condition {
	c := metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse}
	switch {
	case deployErr != nil:
		c.Reason, c.Message = outcome.ReasonOf(deployErr, fleet.ReasonError), deployErr.Error()
	case len(waiting) > 0:
		c.Reason, c.Message = fleet.ReasonWaitingForDeps, waitingMessage(waiting)
	case st.Release == "":
		c.Reason = fleet.ReasonNotInstalled
		switch {
		case spec.Paused:
			c.Reason = fleet.ReasonPaused
		case spec.OffSchedule:
			c.Reason, c.Message = fleet.ReasonOffSchedule, offScheduleMessage(spec)
		}
	case !st.Ready:
		c.Reason, c.Message = fleet.ReasonNotReady, nonReadyMessage(st.NonReadyStatus)
	case !st.NonModified:
		c.Reason, c.Message = fleet.ReasonModified, modifiedMessage(st.ModifiedStatus)
	case st.AppliedDeploymentID != spec.DeploymentID:
		c.Reason, c.Message = fleet.ReasonWaitApplied, "deploymentID "+spec.DeploymentID+" is not applied yet"
		switch {
		case spec.Paused:
			c.Reason = fleet.ReasonPaused
		case spec.OffSchedule:
			c.Reason, c.Message = fleet.ReasonOffSchedule, offScheduleMessage(spec)
		}
	default:
		c.Status, c.Reason = metav1.ConditionTrue, fleet.ReasonReady
	}
	return c
}

// nonReadyMessage and modifiedMessage say what is wrong with the first
// object in Fleet's words ("deployment.apps default/web 0/1 available",
// "job.batch default/x missing"), which its UI, its users' alerts and its
// tests match on; how many more there are comes after.
func nonReadyMessage(n []fleet.NonReadyStatus) string {
	if len(n) == 0 {
		return ""
	}
	return n[0].String() + andMore(len(n)-1)
}

func modifiedMessage(m []fleet.ModifiedStatus) string {
	if len(m) == 0 {
		return ""
	}
	return m[0].String() + andMore(len(m)-1)
}

func andMore(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", n)
}

// setDisplay fills status.display from the conditions and the state.
func setDisplay(bd *fleet.BundleDeployment) {
	show := func(t string) string {
		c := conditions.Get(bd, t)
		switch {
		case c == nil:
			return ""
		case c.Status == metav1.ConditionTrue:
			return "True"
		case c.Message != "":
			return c.Message
		}
		return c.Reason
	}
	bd.Status.Display.Deployed = show(fleet.ConditionDeployed)
	bd.Status.Display.Monitored = show(fleet.ConditionMonitored)
	bd.Status.Display.State = string(summary.State(bd))
}
