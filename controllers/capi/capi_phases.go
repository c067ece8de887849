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

	optedOut bool
	// unenrolled is UnenrolledAnnotation: when a person deleted the fleet
	// Cluster.
	unenrolled   string
	initialized  bool
	secretExists bool
	settings     AgentSettings
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
		if err := r.Client.Delete(ctx, fc, client.Preconditions{UID: &fc.UID}); err != nil && !apierrors.IsNotFound(err) {
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

// reconcileOptOut un-enrolls a cluster that is not (or no longer) to be
// enrolled: opted out by label, not selected in opt-in mode, or unenrolled
// by a person (UnenrolledAnnotation). The fleet Cluster enrolled for it is
// deleted, which has the import controller remove the agent downstream
// before the deployments go (the releases stay unless the cluster says
// fleet.cattle.io/keep-resources-on-unenroll: "false"); the finalizer and
// FleetAgentReady go. A cluster released by an earlier version (no
// finalizer) keeps its fleet Cluster.
func (r *Reconciler) reconcileOptOut(ctx context.Context, s *scope) error {
	s.unenrolled = s.capi.Annotations[UnenrolledAnnotation]
	if s.unenrolled == "" {
		ns := &corev1.Namespace{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: s.capi.Namespace}, ns); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if Selected(s.capi, ns.Labels, r.ClusterSelector, r.NamespaceSelector) {
			return nil
		}
	}
	s.optedOut = true
	if !controllerutil.ContainsFinalizer(s.capi, fleet.CAPIEnrollmentFinalizer) {
		return nil
	}
	if fc := s.fleet; fc != nil && ownedBy(fc, s.capi) && fc.DeletionTimestamp.IsZero() {
		ctrl.LoggerFrom(ctx).Info("Cluster un-enrolled; deleting its fleet Cluster", "cluster", klog.KObj(fc))
		if err := r.Client.Delete(ctx, fc, client.Preconditions{UID: &fc.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting fleet Cluster %s/%s: %w", fc.Namespace, fc.Name, err)
		}
	}
	patch := client.MergeFromWithOptions(s.capi.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(s.capi, fleet.CAPIEnrollmentFinalizer)
	delete(s.capi.Annotations, EnrolledUIDAnnotation)
	return client.IgnoreNotFound(r.Client.Patch(ctx, s.capi, patch))
}

// reconcileRemovedByPerson notices a fleet Cluster deleted by someone else
// while its Cluster API Cluster stays enrolled: being deleted, or gone
// although EnrolledUIDAnnotation says it was created (checked uncached, so
// that a cache behind the creation is not taken for a deletion). The
// decision is recorded on the Cluster API Cluster (UnenrolledAnnotation),
// and the cluster is not enrolled again until a person removes it; the
// import controller removes the agent as for any deleted fleet Cluster.
func (r *Reconciler) reconcileRemovedByPerson(ctx context.Context, s *scope) error {
	if !controllerutil.ContainsFinalizer(s.capi, fleet.CAPIEnrollmentFinalizer) {
		return nil
	}
	switch fc := s.fleet; {
	case fc != nil && ownedBy(fc, s.capi) && !fc.DeletionTimestamp.IsZero():
	case fc == nil && s.capi.Annotations[EnrolledUIDAnnotation] == string(s.capi.UID):
		live := &fleet.Cluster{}
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.capi), live)
		if err == nil {
			s.fleet = live
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
	default:
		return nil
	}
	at := time.Now().UTC().Format(time.RFC3339)
	patch := client.MergeFromWithOptions(s.capi.DeepCopy(), client.MergeFromWithOptimisticLock{})
	metav1.SetMetaDataAnnotation(&s.capi.ObjectMeta, UnenrolledAnnotation, at)
	delete(s.capi.Annotations, EnrolledUIDAnnotation)
	controllerutil.RemoveFinalizer(s.capi, fleet.CAPIEnrollmentFinalizer)
	if err := r.Client.Patch(ctx, s.capi, patch); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("The fleet Cluster was deleted; not enrolling the cluster again until asked", "annotation", UnenrolledAnnotation)
	if r.Recorder != nil {
		r.Recorder.Eventf(s.capi, nil, corev1.EventTypeNormal, fleet.ReasonUnenrolled, "Unenroll",
			"the fleet Cluster was deleted: the agent is removed and the cluster is not enrolled again until annotation %s is removed", UnenrolledAnnotation)
	}
	s.optedOut, s.unenrolled = true, at
	return nil
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
	if s.fleet == nil && (!s.initialized || !s.secretExists) {
		return nil
	}
	if s.fleet != nil && !ownedBy(s.fleet, s.capi) {
		return r.claimName(ctx, s)
	}
	if s.fleet != nil && !s.fleet.DeletionTimestamp.IsZero() {
		// Deleted when the cluster was un-enrolled: its deletion event
		// brings this Cluster back to enroll it anew.
		return nil
	}
	settings, err := DesiredAgentSettings(s.capi)
	if err != nil {
		return outcome.Stallf(fleet.ReasonFailed, "%v: fix it on the Cluster API Cluster (or its ClusterClass variables)", err)
	}
	s.settings = settings
	if !controllerutil.ContainsFinalizer(s.capi, fleet.CAPIEnrollmentFinalizer) {
		patch := client.MergeFromWithOptions(s.capi.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(s.capi, fleet.CAPIEnrollmentFinalizer)
		if err := r.Client.Patch(ctx, s.capi, patch); err != nil {
			return err
		}
	}
	if s.fleet == nil {
		if err := r.createFleetCluster(ctx, s); err != nil {
			return err
		}
	} else if err := r.syncFleetCluster(ctx, s); err != nil {
		return err
	}
	if err := r.reconcileClassGroup(ctx, s); err != nil {
		return err
	}
	return r.recordEnrolled(ctx, s)
}

// recordEnrolled writes EnrolledUIDAnnotation once the fleet Cluster exists,
// so that its disappearance is known for a deletion.
func (r *Reconciler) recordEnrolled(ctx context.Context, s *scope) error {
	uid := string(s.capi.UID)
	if s.fleet.UID == "" || s.capi.Annotations[EnrolledUIDAnnotation] == uid {
		return nil
	}
	patch := client.MergeFromWithOptions(s.capi.DeepCopy(), client.MergeFromWithOptimisticLock{})
	metav1.SetMetaDataAnnotation(&s.capi.ObjectMeta, EnrolledUIDAnnotation, uid)
	return r.Client.Patch(ctx, s.capi, patch)
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
		if err := r.Client.Delete(ctx, fc, client.Preconditions{UID: &fc.UID}); err != nil && !apierrors.IsNotFound(err) {
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
			HostNetwork:      s.settings.HostNetwork,
			AgentTolerations: s.settings.Tolerations,
			TemplateValues:   WithTemplateFacts(nil, TemplateFacts(s.capi)),
		},
	}
	if v, ok := s.capi.Annotations[fleet.KeepResourcesOnUnenrollAnnotation]; ok {
		fc.Annotations[fleet.KeepResourcesOnUnenrollAnnotation] = v
	}
	syncAnnotations(fc, s.capi)
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
	syncAnnotations(fc, s.capi)
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
	if s.settings.HostNetwork != nil {
		fc.Spec.HostNetwork = s.settings.HostNetwork
	}
	if s.settings.TolerationsSet {
		fc.Spec.AgentTolerations = s.settings.Tolerations
	}
	fc.Spec.TemplateValues = WithTemplateFacts(fc.Spec.TemplateValues, TemplateFacts(s.capi))
	if v, ok := s.capi.Annotations[fleet.KeepResourcesOnUnenrollAnnotation]; ok {
		metav1.SetMetaDataAnnotation(&fc.ObjectMeta, fleet.KeepResourcesOnUnenrollAnnotation, v)
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
