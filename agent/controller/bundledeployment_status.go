package controller

import (
	"fmt"
	"strconv"

	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitfleet/fleet/agent/deployer"
	"github.com/gitfleet/fleet/agent/monitor"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
)

// Condition reasons set by the agent.
const (
	ReasonDeployed         = "Deployed"
	ReasonDeploying        = "Deploying"
	ReasonError            = "Error"
	ReasonPaused           = "Paused"
	ReasonWaitingForDeps   = "WaitingForDependencies"
	ReasonInstalled        = "Installed"
	ReasonFailed           = "Failed"
	ReasonNotInstalled     = "NotInstalled"
	ReasonMonitored        = "Monitored"
	ReasonNothingToMonitor = "NothingDeployed"
	ReasonReady            = "Ready"
	ReasonNotReady         = "NotReady"
	ReasonModified         = "Modified"
	ReasonWaitApplied      = "WaitApplied"
)

// computeStatus sets the status fields the agent owns from what one
// reconcile saw: the release, the deploy error, the monitored objects.
func computeStatus(s *scope, reconcileErr error) {
	bd := s.bd
	st := &bd.Status
	gen := bd.Generation
	if s.state == nil {
		// The release could not even be looked up (the agent's cluster is
		// unreachable): keep what is known, say why it is not current.
		if reconcileErr != nil {
			setCondition(st, gen, fleet.ConditionMonitored, metav1.ConditionFalse, ReasonError, reconcileErr.Error())
			setDisplay(bd)
		}
		return
	}
	deployed, last := s.state.deployed, s.state.last
	st.Release, st.AppliedDeploymentID = "", ""
	if deployed != nil {
		st.Release = deployer.Display(deployed)
		ann := deployer.Annotations(deployed)
		st.AppliedDeploymentID = ann[deployer.DeploymentIDAnnotation]
		if g, err := strconv.ParseInt(ann[deployer.SyncGenerationAnnotation], 10, 64); err == nil {
			st.SyncGeneration = &g
		}
	}
	meta.SetStatusCondition(&st.Conditions, installedCondition(deployed, last, gen))
	meta.SetStatusCondition(&st.Conditions, deployedCondition(s, gen))
	switch {
	case s.monitored != nil:
		setCondition(st, gen, fleet.ConditionMonitored, metav1.ConditionTrue, ReasonMonitored, "")
		applyMonitored(st, s.monitored)
	case s.monitorErr != nil:
		setCondition(st, gen, fleet.ConditionMonitored, metav1.ConditionFalse, ReasonError, s.monitorErr.Error())
	case deployed == nil:
		setCondition(st, gen, fleet.ConditionMonitored, metav1.ConditionUnknown, ReasonNothingToMonitor, "nothing is deployed yet")
		applyMonitored(st, &monitor.Result{})
	}
	meta.SetStatusCondition(&st.Conditions, readyCondition(s, gen))
	setDisplay(bd)
}

func applyMonitored(st *fleet.BundleDeploymentStatus, r *monitor.Result) {
	st.Ready, st.NonModified = r.Ready, r.NonModified
	st.NonReadyStatus, st.ModifiedStatus = r.NonReady, r.Modified
	st.Resources, st.ResourceCounts = r.Resources, r.Counts
}

func setCondition(st *fleet.BundleDeploymentStatus, gen int64, t string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
}

func installedCondition(deployed, last *release.Release, gen int64) metav1.Condition {
	c := metav1.Condition{Type: fleet.ConditionInstalled, ObservedGeneration: gen}
	switch {
	case deployed != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonInstalled, "release "+deployer.Display(deployed)
	case last != nil && last.Info != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonFailed,
			fmt.Sprintf("release %s is %s: %s", deployer.Display(last), last.Info.Status, last.Info.Description)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonNotInstalled
	}
	return c
}

func deployedCondition(s *scope, gen int64) metav1.Condition {
	bd := s.bd
	c := metav1.Condition{Type: fleet.ConditionDeployed, ObservedGeneration: gen}
	applied := bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID
	switch {
	case s.deployErr != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonError, s.deployErr.Error()
	case applied:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonDeployed
	case bd.Spec.Paused:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, ReasonPaused, "paused: changes are not deployed"
	case len(s.waiting) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, ReasonWaitingForDeps, waitingMessage(s.waiting)
	default:
		if prev := meta.FindStatusCondition(bd.Status.Conditions, fleet.ConditionDeployed); prev != nil && prev.Status == metav1.ConditionFalse {
			// The last attempt failed and nothing changed since.
			return *prev
		}
		c.Status, c.Reason = metav1.ConditionUnknown, ReasonDeploying
	}
	return c
}

func waitingMessage(waiting []string) string {
	msg := "waiting for " + waiting[0]
	for _, w := range waiting[1:] {
		msg += ", " + w
	}
	return msg
}

func readyCondition(s *scope, gen int64) metav1.Condition {
	bd := s.bd
	st := &bd.Status
	c := metav1.Condition{Type: fleet.ConditionReady, ObservedGeneration: gen, Status: metav1.ConditionFalse}
	switch {
	case s.deployErr != nil:
		c.Reason, c.Message = string(fleet.ErrApplied), s.deployErr.Error()
	case len(s.waiting) > 0:
		c.Reason, c.Message = ReasonWaitingForDeps, waitingMessage(s.waiting)
	case st.Release == "":
		c.Reason = ReasonNotInstalled
		if bd.Spec.Paused {
			c.Reason = ReasonPaused
		}
	case !st.Ready:
		c.Reason, c.Message = ReasonNotReady, nonReadyMessage(st.NonReadyStatus)
	case !st.NonModified:
		c.Reason, c.Message = ReasonModified, modifiedMessage(st.ModifiedStatus)
	case st.AppliedDeploymentID != bd.Spec.DeploymentID:
		c.Reason, c.Message = ReasonWaitApplied, "deploymentID "+bd.Spec.DeploymentID+" is not applied yet"
		if bd.Spec.Paused {
			c.Reason = ReasonPaused
		}
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonReady
	}
	return c
}

func nonReadyMessage(n []fleet.NonReadyStatus) string {
	if len(n) == 0 {
		return ""
	}
	msg := fmt.Sprintf("%s %s: %s", n[0].Kind, objName(n[0].Namespace, n[0].Name), n[0].Summary)
	if len(n) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(n)-1)
	}
	return msg
}

func modifiedMessage(m []fleet.ModifiedStatus) string {
	if len(m) == 0 {
		return ""
	}
	first := m[0]
	msg := fmt.Sprintf("%s %s ", first.Kind, objName(first.Namespace, first.Name))
	switch {
	case first.Create:
		msg += "is missing"
	case first.Delete:
		msg += "is extra"
	default:
		msg += "is modified: " + first.Patch
	}
	if len(m) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(m)-1)
	}
	return msg
}

func objName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// setDisplay fills status.display from the conditions and the state.
func setDisplay(bd *fleet.BundleDeployment) {
	show := func(t string) string {
		c := meta.FindStatusCondition(bd.Status.Conditions, t)
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
