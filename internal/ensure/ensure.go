// Package ensure creates shared objects that more than one controller may
// create at the same moment (a cluster's namespace is made both when the
// cluster registers and when its Cluster is reconciled), treating the other
// writer's success as success.
package ensure

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespace makes sure the namespace exists and carries labels.
func Namespace(ctx context.Context, c client.Client, name string, labels map[string]string) error {
	ns := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		err = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
		if apierrors.IsAlreadyExists(err) {
			return nil // the other writer made it; labels follow on the next pass
		}
		return err
	}
	if err != nil {
		return err
	}
	missing := false
	for k, v := range labels {
		if ns.Labels[k] != v {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	patch := client.MergeFrom(ns.DeepCopy())
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	for k, v := range labels {
		ns.Labels[k] = v
	}
	return c.Patch(ctx, ns, patch)
}
