// Package secretmeta watches Secrets by their metadata alone, for the
// controllers that must hear of a change to a Secret the manager's cache
// does not hold (a kubeconfig Secret may be any Secret of a namespace; a
// registration token's values live in the token's namespace, an agent's
// renewal Secret in its cluster namespace) but need its content only while
// they reconcile, when they read it uncached.
//
// The manager's own cache holds only Secrets of the namespaces it owns
// (controllers.CacheOptions); this is a separate cache of metadata
// informers, over every namespace. Metadata is anyone's to write who may
// write Secrets, and large (a few MiB of labels, 256 KiB of annotations, any
// number of finalizers), so what it keeps of a Secret is bounded: its name,
// namespace, UID, resourceVersion and timestamps, the labels the manager
// selects on (KeptLabels) and the annotations it reads (KeptAnnotations),
// each at most MaxKeptValue long. No data, and no other annotation, which
// may carry a copy of the data (kubectl's last-applied-configuration).
package secretmeta

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Watch is a cache of the metadata of every Secret. Add it to the manager
// (it is a cache runnable, started before the controllers).
type Watch struct {
	cache cache.Cache
}

// New makes a Watch that reads with cfg.
func New(cfg *rest.Config, scheme *runtime.Scheme, mapper meta.RESTMapper, httpClient *http.Client) (*Watch, error) {
	c, err := cache.New(cfg, cache.Options{HTTPClient: httpClient, Scheme: scheme, Mapper: mapper, DefaultTransform: strip})
	if err != nil {
		return nil, err
	}
	return &Watch{cache: c}, nil
}

// ForManager makes a Watch with the manager's config and adds it to mgr.
func ForManager(mgr manager.Manager) (*Watch, error) {
	w, err := New(mgr.GetConfig(), mgr.GetScheme(), mgr.GetRESTMapper(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	return w, mgr.Add(w)
}

// Start runs the informers until ctx ends.
func (w *Watch) Start(ctx context.Context) error { return w.cache.Start(ctx) }

// GetCache lets the manager start the Watch with its caches, before the
// controllers.
func (w *Watch) GetCache() cache.Cache { return w.cache }

// Object is an empty Secret metadata object.
func Object() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
}

// Source is an event source of Secret metadata for a controller.
func (w *Watch) Source(h handler.TypedEventHandler[*metav1.PartialObjectMetadata, reconcile.Request], p ...predicate.TypedPredicate[*metav1.PartialObjectMetadata]) source.Source {
	return source.Kind(w.cache, Object(), h, p...)
}

// Get reads the metadata of the Secret key from the cache.
func (w *Watch) Get(ctx context.Context, key client.ObjectKey) (*metav1.PartialObjectMetadata, error) {
	obj := Object()
	return obj, w.cache.Get(ctx, key, obj)
}

// List lists the metadata of the Secrets in the cache.
func (w *Watch) List(ctx context.Context, opts ...client.ListOption) (*metav1.PartialObjectMetadataList, error) {
	list := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "SecretList"}}
	return list, w.cache.List(ctx, list, opts...)
}

// KeptLabels are the labels kept of a Secret: the manager's own, a
// registration token's name, and Cluster API's cluster name.
var KeptLabels = []string{fleet.ManagedLabel, fleet.RegistrationTokenLabel, "cluster.x-k8s.io/cluster-name"}

// KeptAnnotations are the annotations kept of a Secret: when an agent's
// renewal token was issued, and for whom.
var KeptAnnotations = []string{fleet.CredentialIssuedAtAnnotation, fleet.CredentialServiceAccountAnnotation}

// MaxKeptValue bounds a kept label or annotation value: a namespace/name.
const MaxKeptValue = 320

// strip keeps of an object only what the watchers need: its identity, and
// the labels and annotations they read.
func strip(in any) (any, error) {
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		if obj, err := meta.Accessor(in); err == nil {
			obj.SetLabels(only(obj.GetLabels(), KeptLabels))
			obj.SetAnnotations(only(obj.GetAnnotations(), KeptAnnotations))
			obj.SetManagedFields(nil)
			obj.SetOwnerReferences(nil)
			obj.SetFinalizers(nil)
		}
		return in, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		Labels: only(m.Labels, KeptLabels), Annotations: only(m.Annotations, KeptAnnotations),
	}}, nil
}

// only is the entries of in under keys, with values of at most
// MaxKeptValue bytes; nil when there is none.
func only(in map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := in[k]; ok && len(v) <= MaxKeptValue {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

var _ toolscache.TransformFunc = strip
