package capi

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
)

// What Fleet's Cluster API add-on provider (CAAPF) does besides enrolling:
// the Cluster API Cluster's annotations on the fleet Cluster, and a
// ClusterGroup per ClusterClass.
const (
	// ManagedAnnotationsAnnotation on a fleet Cluster lists, comma-separated,
	// the annotation keys copied from Cluster API, so that removals are
	// copied too (as ManagedLabelsAnnotation for labels).
	ManagedAnnotationsAnnotation = "fleet.cattle.io/capi-annotations"
	// ClassGroupLabel ("true") marks a ClusterGroup the manager made for a
	// ClusterClass; a group of that name without it is a person's, and left
	// alone.
	ClassGroupLabel = "fleet.cattle.io/capi-cluster-class-group"
)

// DesiredAnnotations are the annotations a fleet Cluster takes from its
// Cluster API Cluster, as CAAPF copies them: all but Cluster API's and
// fleet's own keys (cluster.x-k8s.io, fleet.cattle.io and their
// subdomains, which say something about the Cluster API object or would
// steer fleet, as for labels) and kubectl's last-applied configuration.
func DesiredAnnotations(c *clusterv1.Cluster) map[string]string {
	out := map[string]string{}
	for k, v := range c.Annotations {
		if !reservedLabel(k) && k != "kubectl.kubernetes.io/last-applied-configuration" {
			out[k] = v
		}
	}
	return out
}

// ClassGroupName is the name of the ClusterGroup of a ClusterClass in the
// namespace of a Cluster API Cluster that uses it, as CAAPF names it: the
// class's name where the class is in the cluster's namespace,
// "<class>.<class namespace>" where it is in another.
func ClassGroupName(class, classNS, clusterNS string) string {
	if classNS == clusterNS {
		return class
	}
	return names.Limit(class+"."+classNS, 253)
}

// ClassGroup is the ClusterGroup that selects the fleet Clusters of c's
// ClusterClass in c's namespace (by the labels DesiredLabels gives them);
// nil when c uses no ClusterClass.
func ClassGroup(c *clusterv1.Cluster) *fleet.ClusterGroup {
	class := c.Spec.Topology.ClassRef.Name
	if class == "" {
		return nil
	}
	ns := classNamespace(c)
	sel := map[string]string{ClusterClassLabel: class, ClusterClassNamespaceLabel: ns}
	l := maps.Clone(sel)
	l[ClassGroupLabel] = "true"
	return &fleet.ClusterGroup{
		ObjectMeta: metav1.ObjectMeta{Name: ClassGroupName(class, ns, c.Namespace), Namespace: c.Namespace, Labels: l},
		Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}},
	}
}

// reconcileClassGroup makes sure the ClusterGroup of the cluster's
// ClusterClass exists with its selector (with ClassGroups). A group of
// that name that a person made is left as it is. Groups are not deleted
// with their last cluster: Bundles may target them by name.
func (r *Reconciler) reconcileClassGroup(ctx context.Context, s *scope) error {
	if !r.ClassGroups || s.fleet == nil {
		return nil
	}
	want := ClassGroup(s.capi)
	if want == nil {
		return nil
	}
	cur := &fleet.ClusterGroup{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterGroup %s/%s for ClusterClass %s: %w", want.Namespace, want.Name, s.capi.Spec.Topology.ClassRef.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Created the ClusterGroup of a ClusterClass", "clusterGroup", klog.KObj(want))
		return nil
	case err != nil:
		return err
	case cur.Labels[ClassGroupLabel] != "true":
		return nil
	case equality.Semantic.DeepEqual(cur.Spec.Selector, want.Spec.Selector):
		return nil
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Selector = want.Spec.Selector
	if err := r.Client.Patch(ctx, cur, patch); err != nil {
		return fmt.Errorf("updating ClusterGroup %s/%s of ClusterClass %s: %w", cur.Namespace, cur.Name, s.capi.Spec.Topology.ClassRef.Name, err)
	}
	return nil
}

// syncAnnotations brings the annotations copied from Cluster API in line
// on fc, recording their keys in ManagedAnnotationsAnnotation.
func syncAnnotations(fc *fleet.Cluster, c *clusterv1.Cluster) {
	out, keys := SyncLabels(fc.Annotations, ParseManaged(fc.Annotations[ManagedAnnotationsAnnotation]), DesiredAnnotations(c))
	fc.Annotations = out
	if len(keys) == 0 {
		delete(fc.Annotations, ManagedAnnotationsAnnotation)
		return
	}
	fc.Annotations[ManagedAnnotationsAnnotation] = strings.Join(keys, ",")
}
