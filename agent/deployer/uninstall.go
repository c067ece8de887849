package deployer

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// protectedNamespaces are never deleted by deleteNamespace: Kubernetes' own,
// those Fleet never deletes (its workspaces and system namespaces), and
// this project's system namespace. The agent's own namespace is protected
// too (Deployer.SystemNamespace).
var protectedNamespaces = map[string]bool{
	corev1.NamespaceDefault: true, "kube-system": true, "kube-public": true, "kube-node-lease": true,
	"fleet-local": true, "fleet-default": true, "cattle-fleet-system": true, "cattle-fleet-clusters-system": true,
	"cattle-fleet-local-system": true, fleet.DefaultSystemNamespace: true,
}

// protected tells whether deleteNamespace must leave ns alone.
func (d *Deployer) protected(ns string) bool {
	return protectedNamespaces[ns] || (d.SystemNamespace != "" && ns == d.SystemNamespace)
}

// Uninstall removes a release whose BundleDeployment is gone: its objects
// too unless it was deployed with keepResources (then only the release's
// records go, and the objects stay), and its namespace with
// deleteNamespace unless keepResources (deleting the namespace would delete
// what is to be kept) or the namespace is protected. CRDs the release
// deployed stay unless it was deployed with deleteCRDResources: they carry
// Helm's keep policy (see KeepCRD). A release deployed as a serviceAccount is uninstalled as
// that account, its namespace deleted as that account too; its hooks obey
// the namespace option it was deployed with.
func (d *Deployer) Uninstall(ctx context.Context, r *release.Release) error {
	log := ctrl.LoggerFrom(ctx)
	ann := release.Annotations(r)
	id, err := d.as(r.Namespace, ann[fleet.ServiceAccountAnnotation])
	if err != nil {
		return err
	}
	ac, _, err := d.actionConfig(ctx, id, r.Namespace, ann[fleet.ForceNamespaceAnnotation])
	if err != nil {
		return err
	}
	key := ReleaseKey{Namespace: r.Namespace, Name: r.Name}
	if ann[fleet.KeepResourcesAnnotation] == "true" {
		log.Info("Forgetting release, keeping its resources", "release", key.String())
		history, err := ac.Releases.History(r.Name)
		if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
			return err
		}
		for _, h := range history {
			if _, err := ac.Releases.Delete(h.Name, h.Version); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
				return err
			}
		}
	} else {
		log.Info("Uninstalling release", "release", key.String())
		u := action.NewUninstall(ac)
		u.IgnoreNotFound = true
		if _, err := u.Run(r.Name); err != nil {
			return fmt.Errorf("uninstalling release %s: %w", key, err)
		}
	}
	if ann[fleet.DeleteNamespaceAnnotation] == "true" && ann[fleet.KeepResourcesAnnotation] != "true" && !d.protected(r.Namespace) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Namespace}}
		err := id.client.Delete(ctx, ns)
		if apierrors.IsForbidden(err) && id.serviceAccount != "" {
			// Retrying cannot help: the account may not delete it.
			log.Info("Keeping the release namespace: the release's serviceAccount may not delete it",
				"release", key.String(), "serviceAccount", id.serviceAccount)
			return nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s: %w", r.Namespace, err)
		}
	}
	return nil
}
