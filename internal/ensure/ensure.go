// Package ensure creates shared objects that more than one controller may
// create at the same moment (a cluster's namespace is made both when the
// cluster registers and when its Cluster is reconciled), treating the other
// writer's success as success.
package ensure

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Namespace makes sure the namespace exists and carries labels. Both
// writers create it with all of them, so a namespace that lacks one was not
// made for these labels (another Cluster's, or anybody's): it is never
// adopted, and Namespace refuses it with a NamespaceConflict.
func Namespace(ctx context.Context, c client.Client, name string, labels map[string]string) error {
	ns := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		err = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
		if apierrors.IsAlreadyExists(err) {
			// Made meanwhile: by the other writer, or by someone else; the
			// next pass looks at its labels.
			return fmt.Errorf("namespace %s was created meanwhile: checking its labels again", name)
		}
		return err
	}
	if err != nil {
		return err
	}
	if !Carries(ns, labels) {
		return outcome.Stallf(fleet.ReasonNamespaceConflict,
			"namespace %s exists and was not made by fleet for this cluster (its labels %s=%q, %s=%q do not name it): fleet does not adopt it; delete or rename that namespace, or rename the Cluster",
			name, fleet.ClusterLabel, ns.Labels[fleet.ClusterLabel], fleet.ClusterNamespaceLabel, ns.Labels[fleet.ClusterNamespaceLabel])
	}
	return nil
}

// Carries tells whether obj carries every one of labels.
func Carries(obj metav1.Object, labels map[string]string) bool {
	have := obj.GetLabels()
	for k, v := range labels {
		if w, ok := have[k]; !ok || w != v {
			return false
		}
	}
	return true
}
