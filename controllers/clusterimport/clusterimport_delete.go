package clusterimport

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
)

// DefaultRemovalGiveUpAfter is how long a deleted Cluster whose downstream
// cluster cannot be reached waits for it before it is let go with its agent
// still installed.
const DefaultRemovalGiveUpAfter = 5 * time.Minute

// removalPoll is how soon a removal waiting for the agent (its pod to end,
// its releases to be uninstalled) looks again.
const removalPoll = time.Second

// reconcileFinalizer puts AgentRemovalFinalizer on a Cluster this
// controller installs the agent into, so that its deletion removes the
// agent first. The local Cluster has none: its agent comes with the
// manager, and the local Cluster is made again when deleted.
func (r *Reconciler) reconcileFinalizer(ctx context.Context, s *scope) error {
	c := s.cluster
	if r.Local.is(c, secretKey(c)) || controllerutil.ContainsFinalizer(c, fleet.AgentRemovalFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(c, fleet.AgentRemovalFinalizer)
	return r.Client.Patch(ctx, c, patch)
}

// reconcileDelete removes the agent this controller installed from the
// downstream cluster of a Cluster being deleted, before its
// BundleDeployments go (the cluster controller waits for
// AgentRemovalFinalizer): the agent Deployment is deleted and its pods are
// waited for, so that no agent is left to uninstall the releases when the
// BundleDeployments disappear; the rest of what was installed follows. With
// fleet.cattle.io/keep-resources-on-unenroll: "false" the BundleDeployments
// are deleted first and the agent's releases waited for (it uninstalls
// them), then the agent goes.
//
// Nothing is removed from a cluster whose Cluster API Cluster moved away
// (its agent is another manager's now). A kubeconfig that is gone or
// invalid, or a cluster unreachable for RemovalGiveUpAfter since the
// deletion, lets the Cluster go with the agent left in place (a Warning
// event AgentNotRemoved says so).
func (r *Reconciler) reconcileDelete(ctx context.Context, c *fleet.Cluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(c, fleet.AgentRemovalFinalizer) {
		return ctrl.Result{}, r.deleteToken(ctx, c)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("cluster", klog.KObj(c)))
	if c.Annotations[fleet.CAPIMovedAnnotation] != "" {
		return ctrl.Result{}, r.letGo(ctx, c, "")
	}
	s := &scope{cluster: c, now: r.Now()}
	if err := r.reconcileKubeconfig(ctx, s); err != nil {
		if outcome.IsStalling(err) {
			return ctrl.Result{}, r.letGo(ctx, c, err.Error())
		}
		return ctrl.Result{}, err
	}
	waited := s.now.Sub(c.DeletionTimestamp.Time)
	unreachable := func(err error) (ctrl.Result, error) {
		if waited >= r.RemovalGiveUpAfter || outcome.IsStalling(err) {
			return ctrl.Result{}, r.letGo(ctx, c, err.Error())
		}
		ctrl.LoggerFrom(ctx).Info("Waiting for the cluster to remove the agent", "error", err.Error())
		return ctrl.Result{RequeueAfter: min(r.RemovalGiveUpAfter-waited, 10*time.Second)}, nil
	}
	namespace := r.agentNamespace(c)
	if !fleet.KeepResourcesOnUnenroll(c) {
		clusterNS := names.ClusterNamespaceFor(c.Namespace, c.Name, c.Status.Namespace)
		// Deleted once; the waiting that follows only reads.
		bds := &fleet.BundleDeploymentList{}
		if err := r.Client.List(ctx, bds, client.InNamespace(clusterNS)); err != nil {
			return ctrl.Result{}, err
		}
		for i := range bds.Items {
			if bds.Items[i].DeletionTimestamp.IsZero() {
				if err := r.Client.DeleteAllOf(ctx, &fleet.BundleDeployment{}, client.InNamespace(clusterNS)); err != nil && !apierrors.IsNotFound(err) {
					return ctrl.Result{}, err
				}
				break
			}
		}
		var left int
		if err := r.call(ctx, func(ctx context.Context) (err error) {
			left, err = agentinstall.Releases(ctx, s.remote, clusterNS)
			return err
		}); err != nil {
			return unreachable(remoteFailure("looking for the agent's releases", err))
		}
		if left > 0 {
			ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the agent to uninstall its releases", "releases", left)
			return ctrl.Result{RequeueAfter: removalPoll}, nil
		}
	}
	var stopped bool
	if err := r.call(ctx, func(ctx context.Context) (err error) {
		stopped, err = agentinstall.StopAgent(ctx, s.remote, namespace)
		return err
	}); err != nil {
		return unreachable(remoteFailure("stopping the agent", err))
	}
	if !stopped {
		ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the agent's pods to end", "agentNamespace", namespace)
		return ctrl.Result{RequeueAfter: removalPoll}, nil
	}
	if err := r.call(ctx, func(ctx context.Context) error { return agentinstall.Remove(ctx, s.remote, namespace) }); err != nil {
		return unreachable(remoteFailure("removing the agent", err))
	}
	ctrl.LoggerFrom(ctx).Info("Removed the agent from the cluster", "agentNamespace", namespace, "keepResources", fleet.KeepResourcesOnUnenroll(c))
	if r.Recorder != nil {
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, fleet.ReasonAgentRemoved, "Unenroll", "removed the agent from namespace %s downstream", namespace)
	}
	return ctrl.Result{}, r.dropFinalizer(ctx, c)
}

// letGo drops AgentRemovalFinalizer without removing the agent; why, when
// set, is the reason, told in a Warning event.
func (r *Reconciler) letGo(ctx context.Context, c *fleet.Cluster, why string) error {
	if why != "" {
		ctrl.LoggerFrom(ctx).Info("Could not remove the agent from the cluster; letting the Cluster go", "reason", why)
		if r.Recorder != nil {
			r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, fleet.ReasonAgentNotRemoved, "Unenroll",
				"the agent was left in the cluster: %s", why)
		}
	}
	return r.dropFinalizer(ctx, c)
}

func (r *Reconciler) dropFinalizer(ctx context.Context, c *fleet.Cluster) error {
	if err := r.deleteToken(ctx, c); err != nil {
		return err
	}
	if !controllerutil.ContainsFinalizer(c, fleet.AgentRemovalFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(c, fleet.AgentRemovalFinalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, c, patch))
}
