package capi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// scope is what the phases of one reconcile share.
type scope struct {
	capi         *clusterv1.Cluster
	fleet        *fleet.Cluster
	initialized  bool
	secretExists bool
}

func (s *scope) secretName() string { return KubeconfigSecretName(s.capi.Name) }

// KubeconfigSecretName is Cluster API's kubeconfig Secret of a cluster.
func KubeconfigSecretName(cluster string) string { return cluster + "-kubeconfig" }

// enrollError is a failure only a person can fix; it ends the reconcile
// with reconcile.TerminalError and shows in FleetAgentReady.
type enrollError struct{ msg string }

func (e *enrollError) Error() string { return e.msg }

func userError(err error) error {
	var ue *enrollError
	if errors.As(err, &ue) {
		return ue
	}
	return nil
}

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

// capiController returns the controller reference of a fleet Cluster when it
// is a Cluster API Cluster.
func capiController(fc *fleet.Cluster) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(fc)
	if ref == nil || ref.Kind != "Cluster" || !strings.HasPrefix(ref.APIVersion, clusterv1.GroupVersion.Group+"/") {
		return nil
	}
	return ref
}

// deleteOrphan deletes a fleet Cluster whose Cluster API Cluster is gone
// (it went without this controller's finalizer, or the finalizer was
// removed by hand).
func (r *Reconciler) deleteOrphan(ctx context.Context, key types.NamespacedName) error {
	fc := &fleet.Cluster{}
	if err := r.Client.Get(ctx, key, fc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ref := capiController(fc); ref == nil || ref.Name != key.Name || !fc.DeletionTimestamp.IsZero() {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Deleting the fleet Cluster of a deleted Cluster API Cluster", "cluster", klog.KObj(fc))
	return client.IgnoreNotFound(r.Client.Delete(ctx, fc, client.Preconditions{UID: &fc.UID}))
}

// reconcileDelete deletes the fleet Cluster with its Cluster API Cluster;
// the cluster controller then deletes the cluster namespace and its
// deployments.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	if !controllerutil.ContainsFinalizer(s.capi, fleet.CAPIEnrollmentFinalizer) {
		return nil
	}
	if fc := s.fleet; fc != nil && metav1.IsControlledBy(fc, s.capi) && fc.DeletionTimestamp.IsZero() {
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

func (r *Reconciler) optedOut(ctx context.Context, c *clusterv1.Cluster) (bool, error) {
	if c.Labels[EnrollLabel] == "false" {
		return true, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: c.Namespace}, ns); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return OptedOut(c, ns.Labels), nil
}

// release stops managing an opted-out cluster. An enrolled cluster keeps
// its fleet Cluster (deleting it would remove every deployment from a
// running cluster on a label change), but its labels are no longer synced,
// the finalizer goes and FleetAgentReady is removed.
func (r *Reconciler) release(ctx context.Context, s *scope) error {
	if controllerutil.ContainsFinalizer(s.capi, fleet.CAPIEnrollmentFinalizer) {
		ctrl.LoggerFrom(ctx).Info("Cluster opted out of fleet enrollment; releasing it")
	}
	if err := r.removeFinalizer(ctx, s.capi); err != nil {
		return err
	}
	return r.setCondition(ctx, s.capi, nil)
}

// reconcileEnrollment creates the fleet Cluster once the control plane is
// initialized and its kubeconfig Secret exists, and keeps it in line after.
func (r *Reconciler) reconcileEnrollment(ctx context.Context, s *scope) error {
	s.initialized = ControlPlaneInitialized(s.capi)
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.capi.Namespace, Name: s.secretName()}, &corev1.Secret{})
	switch {
	case err == nil:
		s.secretExists = true
	case !apierrors.IsNotFound(err):
		return err
	}
	if s.fleet == nil && !(s.initialized && s.secretExists) {
		return nil
	}
	if s.fleet != nil && !metav1.IsControlledBy(s.fleet, s.capi) {
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
	if capiController(fc) == nil {
		return &enrollError{msg: fmt.Sprintf("fleet Cluster %s/%s already exists and was not created for this Cluster API Cluster: delete it, or opt this cluster out with label %s=false", fc.Namespace, fc.Name, EnrollLabel)}
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
			Annotations: map[string]string{ManagedLabelsAnnotation: strings.Join(keys, ",")},
		},
		Spec: fleet.ClusterSpec{
			KubeConfigSecret: s.secretName(),
			AgentNamespace:   s.capi.Annotations[AgentNamespaceAnnotation],
			ClientID:         s.capi.Annotations[ClientIDAnnotation],
		},
	}
	if err := controllerutil.SetControllerReference(s.capi, fc, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, fc); err != nil {
		return fmt.Errorf("creating fleet Cluster %s/%s: %w", fc.Namespace, fc.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Enrolled the Cluster API Cluster as a fleet Cluster", "cluster", klog.KObj(fc))
	s.fleet = fc
	return nil
}

// syncFleetCluster keeps the labels from Cluster API, the kubeconfig Secret
// and the agent namespace annotation in line.
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

// setCondition writes FleetAgentReady (nil: removes it) with server-side
// apply of that one entry of status.conditions, a map list keyed by type:
// the conditions of Cluster API's own controllers are left alone. It writes
// nothing when the condition is already as computed.
func (r *Reconciler) setCondition(ctx context.Context, c *clusterv1.Cluster, cond *metav1.Condition) error {
	existing := meta.FindStatusCondition(c.Status.Conditions, ConditionFleetAgentReady)
	if cond == nil && existing == nil {
		return nil
	}
	if cond != nil && existing != nil && existing.Status == cond.Status && existing.Reason == cond.Reason &&
		existing.Message == cond.Message && existing.ObservedGeneration == cond.ObservedGeneration {
		return nil
	}
	obj := map[string]any{
		"apiVersion": clusterv1.GroupVersion.String(),
		"kind":       "Cluster",
		"metadata":   map[string]any{"name": c.Name, "namespace": c.Namespace},
	}
	if cond != nil {
		cond.LastTransitionTime = metav1.NewTime(r.Now())
		if existing != nil && existing.Status == cond.Status {
			cond.LastTransitionTime = existing.LastTransitionTime
		}
		obj["status"] = map[string]any{"conditions": []metav1.Condition{*cond}}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return err
	}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

func sameCondition(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}
