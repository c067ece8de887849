// Package downstream is the agent's own cluster as the resident agent's
// reconciler sees it: the Helm release records it reads (agent/release),
// drift it corrects with server-side apply, kinds it maps, and the
// installs, upgrades and uninstalls it hands to an Operator (in production
// the fleet-agent-deploy binary, see agent/deployrpc). Nothing here links
// Helm's SDK.
package downstream

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/deployrpc"
	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/release"
)

// FieldManager is the agent's field manager for drift correction.
const FieldManager = "fleet-agent"

// Operator installs, upgrades and uninstalls releases. It names the release
// on what it logs (deployrpc.ReleaseKey): ctx's logger does not carry it.
type Operator interface {
	Deploy(ctx context.Context, d deployrpc.Deploy) error
	Uninstall(ctx context.Context, rel *release.Release) error
}

// Cluster is the agent's own cluster.
type Cluster struct {
	Operator
	config           *rest.Config
	client           client.Client
	dynamic          dynamic.Interface
	mapper           *kinds.Mapper
	records          release.Reader
	clusterNamespace string
}

// New returns the Cluster cfg points at; c is a direct (uncached) client of
// it. clusterNamespace is the agent's cluster namespace upstream; it marks
// the releases as the agent's.
func New(cfg *rest.Config, c client.Client, clusterNamespace string, op Operator) (*Cluster, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{
		Operator: op, config: cfg, client: c, dynamic: dyn,
		mapper:  kinds.NewMapper(memory.NewMemCacheClient(dc)),
		records: release.Reader{Client: c}, clusterNamespace: clusterNamespace,
	}, nil
}

// Mapper is the Cluster's REST mapper over cached discovery.
func (c *Cluster) Mapper() meta.RESTMapper { return c.mapper }

// Dynamic is a dynamic client of the cluster.
func (c *Cluster) Dynamic() dynamic.Interface { return c.dynamic }

// Scope tells whether a kind is namespaced (see kinds.Mapper.Scope).
func (c *Cluster) Scope(gvk schema.GroupVersionKind) (namespaced, known bool) {
	return c.mapper.Scope(gvk)
}

// Last returns the latest revision of a release; nil when there is none.
func (c *Cluster) Last(ctx context.Context, key release.Key) (*release.Release, error) {
	return c.records.Last(ctx, key)
}

// Deployed returns the latest deployed revision of a release; nil when none
// is deployed.
func (c *Cluster) Deployed(ctx context.Context, key release.Key) (*release.Release, error) {
	return c.records.Deployed(ctx, key)
}

// Owned returns the latest revision of every release this agent deployed,
// in any namespace.
func (c *Cluster) Owned(ctx context.Context) ([]*release.Release, error) {
	return c.records.Owned(ctx, c.clusterNamespace)
}

// as is a client acting as serviceAccount of namespace (the agent itself
// when empty).
func (c *Cluster) as(namespace, serviceAccount string) (client.Client, error) {
	if serviceAccount == "" {
		return c.client, nil
	}
	cfg := rest.CopyConfig(c.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: release.ServiceAccountUser(namespace, serviceAccount)}
	return client.New(cfg, client.Options{Scheme: c.client.Scheme(), Mapper: c.mapper})
}

// Correct undoes drift of a release's objects: desired objects that were
// modified or deleted are applied again (server-side apply, taking over the
// fields), extra objects are deleted unless Helm's resource policy keeps
// them. With force an object that cannot be applied is replaced, except a
// CustomResourceDefinition: deleting it would delete every custom resource of
// its kind. A release deployed as serviceAccount is corrected as
// that account.
func (c *Cluster) Correct(ctx context.Context, key release.Key, serviceAccount string, apply, remove []*unstructured.Unstructured, force bool) error {
	log := ctrl.LoggerFrom(ctx)
	cl, err := c.as(key.Namespace, serviceAccount)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range apply {
		o = o.DeepCopy()
		setHelmOwnership(o, key)
		err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(FieldManager), client.ForceOwnership)
		if err != nil && force && !isCRD(o) {
			log.Info("Replacing an object that could not be corrected in place", "kind", o.GetKind(),
				"namespace", o.GetNamespace(), "name", o.GetName(), "reason", err.Error())
			if err = client.IgnoreNotFound(cl.Delete(ctx, o.DeepCopy())); err == nil {
				err = cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(FieldManager), client.ForceOwnership)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("correcting %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err))
		}
	}
	for _, o := range remove {
		if release.Kept(o) {
			continue // Helm's resource policy keeps it
		}
		if err := cl.Delete(ctx, o.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting extra %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// setHelmOwnership marks an object as the release's, as Helm does, so that a
// recreated object can still be upgraded by the release.
func setHelmOwnership(o *unstructured.Unstructured, key release.Key) {
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
