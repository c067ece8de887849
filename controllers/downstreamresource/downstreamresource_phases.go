package downstreamresource

import (
	"context"
	"crypto/ecdh"
	"fmt"
	"maps"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/sealing"
)

// want is the seal a BundleDeployment should carry: its Sources, Missing
// and Recipient as the caches show them; Data is sealed only when they
// differ from what it carries.
type want struct {
	*fleet.SealedResources
	key *ecdh.PublicKey
}

// agentKey is the sealing key the agent published on its Lease; nil when
// there is none, or none that parses.
func agentKey(lease *coordinationv1.Lease) *ecdh.PublicKey {
	key, err := sealing.ParsePublicKey(lease.Annotations[fleet.SealingKeyAnnotation])
	if err != nil {
		return nil
	}
	return key
}

// desired computes the seal's versions from the caches; nil when the
// BundleDeployment names no downstreamResources. Without a published agent
// key the seal is left as it is: the agent's Lease brings it back.
func (r *Reconciler) desired(ctx context.Context, bd *fleet.BundleDeployment) (*want, error) {
	if len(bd.Spec.Options.DownstreamResources) == 0 {
		return nil, nil
	}
	lease := &coordinationv1.Lease{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: bd.Namespace, Name: fleet.AgentLeaseName}, lease)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	var key *ecdh.PublicKey
	if err == nil {
		key = agentKey(lease)
	}
	if key == nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Not sealing yet: the cluster's agent has published no sealing key", "bundleDeployment", client.ObjectKeyFromObject(bd))
		return &want{SealedResources: bd.Spec.SealedResources}, nil
	}
	ns := bd.Labels[fleet.BundleNamespaceLabel]
	w := &want{SealedResources: &fleet.SealedResources{Recipient: sealing.Fingerprint(key)}, key: key}
	for _, d := range bd.Spec.Options.DownstreamResources {
		m, err := r.meta(ctx, ns, d)
		switch {
		case apierrors.IsNotFound(err):
			w.Missing = append(w.Missing, d.Kind+"/"+d.Name)
		case err != nil:
			return nil, err
		default:
			w.Sources = append(w.Sources, version(d, m.UID, m.ResourceVersion))
		}
	}
	return w, nil
}

// meta reads a source's metadata from the caches.
func (r *Reconciler) meta(ctx context.Context, namespace string, d fleet.DownstreamResource) (*metav1.PartialObjectMetadata, error) {
	key := types.NamespacedName{Namespace: namespace, Name: d.Name}
	switch d.Kind {
	case "Secret":
		return r.Secrets.Get(ctx, key)
	case "ConfigMap":
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		return m, r.Client.Get(ctx, key, m)
	}
	// The CRD admits Secret and ConfigMap only.
	return nil, apierrors.NewNotFound(corev1.Resource(strings.ToLower(d.Kind)), d.Name)
}

// version is what Sources holds of one source.
func version(d fleet.DownstreamResource, uid types.UID, resourceVersion string) string {
	return d.Kind + "/" + d.Name + " " + string(uid) + " " + resourceVersion
}

// equalSeal tells whether have seals what w describes.
func equalSeal(have *fleet.SealedResources, w *want) bool {
	if w == nil {
		return have == nil
	}
	if w.key == nil {
		return true
	}
	return have != nil && have.Data != "" && have.Recipient == w.Recipient &&
		slices.Equal(have.Sources, w.Sources) && slices.Equal(have.Missing, w.Missing)
}

// seal reads the sources' values and seals them to the agent's key for
// this BundleDeployment; Sources are the versions actually read.
func (r *Reconciler) seal(ctx context.Context, bd *fleet.BundleDeployment, w *want) (*fleet.SealedResources, error) {
	ns := bd.Labels[fleet.BundleNamespaceLabel]
	out := &fleet.SealedResources{Recipient: w.Recipient}
	var p sealing.Payload
	for _, d := range bd.Spec.Options.DownstreamResources {
		res, uid, rv, err := r.read(ctx, ns, d)
		switch {
		case apierrors.IsNotFound(err):
			out.Missing = append(out.Missing, d.Kind+"/"+d.Name)
			continue
		case err != nil:
			return nil, fmt.Errorf("reading the %s %s/%s named in downstreamResources: %w", d.Kind, ns, d.Name, err)
		}
		out.Sources = append(out.Sources, version(d, uid, rv))
		p.Resources = append(p.Resources, res)
	}
	data, err := sealing.Seal(w.key, bd.Namespace, bd.Name, p)
	if err != nil {
		return nil, err
	}
	out.Data = data
	return out, nil
}

// read reads one source, uncached, as the agent creates it.
func (r *Reconciler) read(ctx context.Context, namespace string, d fleet.DownstreamResource) (sealing.Resource, types.UID, string, error) {
	key := types.NamespacedName{Namespace: namespace, Name: d.Name}
	res := sealing.Resource{Kind: d.Kind, Name: d.Name}
	switch d.Kind {
	case "Secret":
		s := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, key, s); err != nil {
			return res, "", "", err
		}
		res.Type, res.Data = string(s.Type), s.Data
		res.Labels, res.Annotations = kept(s.Labels), kept(s.Annotations)
		return res, s.UID, s.ResourceVersion, nil
	case "ConfigMap":
		c := &corev1.ConfigMap{}
		if err := r.APIReader.Get(ctx, key, c); err != nil {
			return res, "", "", err
		}
		res.StringData, res.Data = c.Data, c.BinaryData
		res.Labels, res.Annotations = kept(c.Labels), kept(c.Annotations)
		return res, c.UID, c.ResourceVersion, nil
	}
	return res, "", "", apierrors.NewNotFound(corev1.Resource(strings.ToLower(d.Kind)), d.Name)
}

// kept are the labels or annotations copied: not kubectl's (its
// last-applied-configuration holds a Secret's values) nor fleet's own.
func kept(in map[string]string) map[string]string {
	out := maps.Clone(in)
	maps.DeleteFunc(out, func(k, _ string) bool {
		return strings.HasPrefix(k, "kubectl.kubernetes.io/") || strings.HasPrefix(k, "fleet.cattle.io/") || strings.HasPrefix(k, "objectset.rio.cattle.io/")
	})
	if len(out) == 0 {
		return nil
	}
	return out
}
