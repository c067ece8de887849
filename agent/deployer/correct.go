package deployer

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the agent's field manager for drift correction.
const FieldManager = "fleet-agent"

// Correct undoes drift of a release's objects: desired objects that were
// modified or deleted are applied again (server-side apply, taking over the
// fields), extra objects are deleted unless Helm's resource policy keeps
// them. With force an object that cannot be applied is replaced, except a
// CustomResourceDefinition: deleting it would delete every custom resource of
// its kind. A release deployed as serviceAccount is corrected as
// that account.
func (d *Deployer) Correct(ctx context.Context, key ReleaseKey, serviceAccount string, apply, remove []*unstructured.Unstructured, force bool) error {
	log := ctrl.LoggerFrom(ctx)
	id, err := d.as(key.Namespace, serviceAccount)
	if err != nil {
		return err
	}
	c := id.client
	var errs []error
	for _, o := range apply {
		o = o.DeepCopy()
		setHelmOwnership(o, key)
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(FieldManager), client.ForceOwnership)
		if err != nil && force && !isCRD(o) {
			log.Info("Replacing an object that could not be corrected in place", "kind", o.GetKind(),
				"namespace", o.GetNamespace(), "name", o.GetName(), "reason", err.Error())
			if err = client.IgnoreNotFound(c.Delete(ctx, o.DeepCopy())); err == nil {
				err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(FieldManager), client.ForceOwnership)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("correcting %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err))
		}
	}
	for _, o := range remove {
		if Kept(o) {
			continue // Helm's resource policy keeps it (see KeepCRD)
		}
		if err := c.Delete(ctx, o.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting extra %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// setHelmOwnership marks an object as the release's, as Helm does, so that a
// recreated object can still be upgraded by the release.
func setHelmOwnership(o *unstructured.Unstructured, key ReleaseKey) {
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels["app.kubernetes.io/managed-by"] = "Helm"
	o.SetLabels(labels)
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann["meta.helm.sh/release-name"] = key.Name
	ann["meta.helm.sh/release-namespace"] = key.Namespace
	o.SetAnnotations(ann)
}

func isCRD(o *unstructured.Unstructured) bool {
	return o.GetKind() == "CustomResourceDefinition" && o.GroupVersionKind().Group == "apiextensions.k8s.io"
}
