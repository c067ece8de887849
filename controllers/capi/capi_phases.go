package capi

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// scope is what the phases of one reconcile share.
type scope struct {
	capi  *clusterv1.Cluster
	fleet *fleet.Cluster
	// before is FleetAgentReady as read, to write only a change.
	before *metav1.Condition

	optedOut     bool
	initialized  bool
	secretExists bool
}

func (s *scope) secretName() string { return KubeconfigSecretName(s.capi.Name) }

// KubeconfigSecretName is Cluster API's kubeconfig Secret of a cluster.
func KubeconfigSecretName(cluster string) string { return cluster + "-kubeconfig" }

func (r *Reconciler) loadFleetCluster(ctx context.Context, s *scope) error {
	fc := &fleet.Cluster{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.capi), fc)
	switch {
	case apierrors.IsNotFound(err):
		s.fleet = nil
		return nil
	case err != nil:
		return err
	}
	s.fleet = fc
	return nil
}

// ownedBy tells whether fc was enrolled for the Cluster API Cluster c
// (this very object, by UID).
func ownedBy(fc *fleet.Cluster, c *clusterv1.Cluster) bool {
	uid, ok := EnrolledFor(fc)
	return ok && uid == c.UID
}

// recordMove marks the fleet Cluster enrolled for the Cluster API Cluster
// key as moved away (fleet.CAPIMovedAnnotation), when its Cluster API
// Cluster (of UID uid; any when empty) left without this controller's
// finalizer: `clusterctl move` strips every finalizer and deletes it, and
// it lives on in another management cluster. The fleet Cluster is not
// deleted: that would delete its deployments and so uninstall every
// release of a cluster that only changed managers. The patch holds the
// resourceVersion read, so a fleet Cluster whose deletion the cache has not
// shown yet (a real deletion, through the finalizer) is not marked.
func (r *Reconciler) recordMove(ctx context.Context, key types.NamespacedName, uid types.UID) error {
	fc := &fleet.Cluster{}
	if err := r.Client.Get(ctx, key, fc); err != nil {
		return client.IgnoreNotFound(err)
	}
	enrolled, ok := EnrolledFor(fc)
	if !ok || uid != "" && enrolled != uid || !fc.DeletionTimestamp.IsZero() || fc.Annotations[fleet.CAPIMovedAnnotation] != "" {
		return nil
	}
	patch := client.MergeFromWithOptions(fc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	metav1.SetMetaDataAnnotation(&fc.ObjectMeta, fleet.CAPIMovedAnnotation, time.Now().UTC().Format(time.RFC3339))
	metav1.SetMetaDataAnnotation(&fc.ObjectMeta, CAPIClusterNameAnnotation, key.Name)
	metav1.SetMetaDataAnnotation(&fc.ObjectMeta, CAPIClusterUIDAnnotation, string(enrolled))
	fc.OwnerReferences = WithoutCAPIOwner(fc.OwnerReferences)
	if err := r.Client.Patch(ctx, fc, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	msg := "the Cluster API Cluster was moved to another management cluster; this fleet Cluster and its deployments stay, and the agent goes to the manager there: delete this Cluster once the move is done"
	ctrl.LoggerFrom(ctx).Info("Cluster API Cluster moved away; keeping its fleet Cluster", "cluster", klog.KObj(fc))
	if r.Recorder != nil {
		r.Recorder.Eventf(fc, nil, corev1.EventTypeNormal, fleet.ReasonMovedAway, "Enroll", "%s", msg)
	}
	return nil
}

// reconcileMove handles a Cluster API Cluster that `clusterctl move` is
// deleting (DeleteForMoveAnnotation): its fleet Cluster is marked moved
// away and kept, and should the deletion wait for this controller's
// finalizer, it goes without deleting anything.
func (r *Reconciler) reconcileMove(ctx context.Context, c *clusterv1.Cluster) error {
	if err := r.recordMove(ctx, client.ObjectKeyFromObject(c), c.UID); err != nil {
		return err
	}
	if c.DeletionTimestamp.IsZero() {
		return nil
	}
	return r.removeFinalizer(ctx, c)
}

// reconcileDelete deletes the fleet Cluster with its Cluster API Cluster;
// the cluster controller then deletes the cluster namespace and its
// deployments.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	if !controllerutil.ContainsFinalizer(s.capi, fleet.CAPIEnrollmentFinalizer) {
		return nil
	}
	if fc := s.fleet; fc != nil && ownedBy(fc, s.capi) && fc.DeletionTimestamp.IsZero() {
		ctrl.LoggerFrom(ctx).Info("Deleting the fleet Cluster of a deleted Cluster API Cluster", "cluster", klog.KObj(fc))
		if err := r.Client.Delete(ctx, fc, client.Preconditions{UID: &fc.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting fleet Cluster %s/%s: %w", fc.Namespace, fc.Name, err)
		}
	}
	return r.removeFinalizer(ctx, s.capi)
}

func (r *Reconciler) removeFinalizer(ctx context.Context, c *clusterv1.Cluster) error {
	if !controllerutil.ContainsFinalizer(c, fleet.CAPIEnrollmentFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(c, fleet.CAPIEnrollmentFinalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, c, patch))
}

// reconcileOptOut releases a cluster that opted out of enrollment. An
// enrolled cluster keeps its fleet Cluster (deleting it would remove every
// deployment from a running cluster on a label change), but its labels are
// no longer synced, the finalizer goes and FleetAgentReady is removed.
func (r *Reconciler) reconcileOptOut(ctx context.Context, s *scope) error {
	if s.capi.Labels[EnrollLabel] != "false" {
		ns := &corev1.Namespace{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: s.capi.Namespace}, ns); client.IgnoreNotFound(err) != nil {
			return err
		}
		if !OptedOut(s.capi, ns.Labels) {
			return nil
		}
	}
	s.optedOut = true
	if controllerutil.ContainsFinalizer(s.capi, fleet.CAPIEnrollmentFinalizer) {
		ctrl.LoggerFrom(ctx).Info("Cluster opted out of fleet enrollment; releasing it")
	}
	return r.removeFinalizer(ctx, s.capi)
}

// reconcileObserve reads what enrollment waits for: an initialized control
// plane and its kubeconfig Secret.
func (r *Reconciler) reconcileObserve(ctx context.Context, s *scope) error {
	s.initialized = ControlPlaneInitialized(s.capi)
	_, err := r.Secrets.Get(ctx, types.NamespacedName{Namespace: s.capi.Namespace, Name: s.secretName()})
	switch {
	case err == nil:
		s.secretExists = true
	case !apierrors.IsNotFound(err):
		return err
	}
	return nil
}

// reconcileEnrollment creates the fleet Cluster once the control plane is
// initialized and its kubeconfig Secret exists, and keeps it in line after.
func (r *Reconciler) reconcileEnrollment(ctx context.Context, s *scope) error {
	if s.fleet == nil && !(s.initialized && s.secretExists) {
		return nil
	}
	if s.fleet != nil && !ownedBy(s.fleet, s.capi) {
		return r.claimName(ctx, s)
	}
	if !controllerutil.ContainsFinalizer(s.capi, fleet.CAPIEnrollmentFinalizer) {
		patch := client.MergeFromWithOptions(s.capi.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(s.capi, fleet.CAPIEnrollmentFinalizer)
		if err := r.Client.Patch(ctx, s.capi, patch); err != nil {
			return err
		}
	}
	if s.fleet == nil {
		return r.createFleetCluster(ctx, s)
	}
	return r.syncFleetCluster(ctx, s)
}

// claimName handles a fleet Cluster of the same name that this Cluster API
// Cluster does not control: one left by an earlier Cluster API Cluster of
// that name is deleted and waited for; any other is a conflict.
func (r *Reconciler) claimName(ctx context.Context, s *scope) error {
	fc := s.fleet
	if _, ok := EnrolledFor(fc); !ok {
		return outcome.Stallf(fleet.ReasonFailed, "fleet Cluster %s/%s already exists and was not created for this Cluster API Cluster: delete it, or opt this cluster out with label %s=false", fc.Namespace, fc.Name, EnrollLabel)
	}
	if fc.DeletionTimestamp.IsZero() {
		ctrl.LoggerFrom(ctx).Info("Deleting the fleet Cluster of an earlier Cluster API Cluster of the same name", "cluster", klog.KObj(fc))
		if err := r.Client.Delete(ctx, fc, client.Preconditions{UID: &fc.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	// Its deletion event brings this Cluster back.
	return nil
}

func (r *Reconciler) createFleetCluster(ctx context.Context, s *scope) error {
	labels, keys := SyncLabels(nil, nil, DesiredLabels(s.capi))
	fc := &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.capi.Name, Namespace: s.capi.Namespace, Labels: labels,
			Annotations: map[string]string{
				ManagedLabelsAnnotation:   strings.Join(keys, ","),
				CAPIClusterNameAnnotation: s.capi.Name,
				CAPIClusterUIDAnnotation:  string(s.capi.UID),
			},
		},
		Spec: fleet.ClusterSpec{
			KubeConfigSecret: s.secretName(),
			AgentNamespace:   s.capi.Annotations[AgentNamespaceAnnotation],
			ClientID:         s.capi.Annotations[ClientIDAnnotation],
		},
	}
	if err := r.Client.Create(ctx, fc); err != nil {
		return fmt.Errorf("creating fleet Cluster %s/%s: %w", fc.Namespace, fc.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Enrolled the Cluster API Cluster as a fleet Cluster", "cluster", klog.KObj(fc))
	s.fleet = fc
	return nil
}

// syncFleetCluster keeps the labels from Cluster API, the kubeconfig Secret,
// the agent namespace annotation and the record of the Cluster API Cluster
// in line.
func (r *Reconciler) syncFleetCluster(ctx context.Context, s *scope) error {
	fc := s.fleet
	if !fc.DeletionTimestamp.IsZero() {
		// Deleted by someone: its deletion event brings it back.
		return nil
	}
	patch := client.MergeFrom(fc.DeepCopy())
	labels, keys := SyncLabels(fc.Labels, ParseManaged(fc.Annotations[ManagedLabelsAnnotation]), DesiredLabels(s.capi))
	fc.Labels = labels
	metav1.SetMetaDataAnnotation(&fc.ObjectMeta, ManagedLabelsAnnotation, strings.Join(keys, ","))
	// Fleet Clusters enrolled with an owner reference lose it (see
	// CAPIClusterUIDAnnotation); a move that did not happen after all (the
	// Cluster API Cluster is still here) is forgotten.
	metav1.SetMetaDataAnnotation(&fc.ObjectMeta, CAPIClusterNameAnnotation, s.capi.Name)
	metav1.SetMetaDataAnnotation(&fc.ObjectMeta, CAPIClusterUIDAnnotation, string(s.capi.UID))
	delete(fc.Annotations, fleet.CAPIMovedAnnotation)
	fc.OwnerReferences = WithoutCAPIOwner(fc.OwnerReferences)
	fc.Spec.KubeConfigSecret = s.secretName()
	fc.Spec.KubeConfigSecretNamespace = ""
	if ns, ok := s.capi.Annotations[AgentNamespaceAnnotation]; ok {
		fc.Spec.AgentNamespace = ns
	}
	if fc.Spec.ClientID == "" {
		fc.Spec.ClientID = s.capi.Annotations[ClientIDAnnotation]
	}
	data, err := patch.Data(fc)
	if err != nil || string(data) == "{}" {
		return err
	}
	if err := r.Client.Patch(ctx, fc, patch); err != nil {
		return fmt.Errorf("updating fleet Cluster %s/%s: %w", fc.Namespace, fc.Name, err)
	}
	return nil
}
