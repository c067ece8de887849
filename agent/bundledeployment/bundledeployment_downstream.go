package bundledeployment

import (
	"context"
	"crypto/ecdh"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/sealing"
)

// sealingRetry is how soon a BundleDeployment whose downstreamResources are
// not yet sealed to this agent's key is looked at again (the manager's
// seal, a spec change, brings it back sooner).
const sealingRetry = 30 * time.Second

// applyDownstreamResources opens the BundleDeployment's sealed
// downstreamResources and creates or updates them in the release namespace
// before anything is deployed; a missing source or a seal this agent cannot
// open deploys nothing. Copies the BundleDeployment no longer names are
// deleted. Nothing of their values is logged or reported.
func (r *Reconciler) applyDownstreamResources(ctx context.Context, s *scope) error {
	if r.Local == nil {
		return nil
	}
	if len(s.bd.Spec.Options.DownstreamResources) == 0 {
		// Copies made before the field was emptied, perhaps before the
		// agent restarted, go; looked for once per BundleDeployment ("").
		if v, ok := r.copies.Load(s.bd.Name); ok && v.(string) == "" {
			return nil
		}
		if err := r.removeCopies(ctx, s.bd.Name, nil); err != nil {
			return err
		}
		r.copies.Store(s.bd.Name, "")
		return nil
	}
	err := r.openAndApply(ctx, s)
	if err != nil {
		s.deployErr = err
	}
	return err
}

func (r *Reconciler) openAndApply(ctx context.Context, s *scope) error {
	sealed := s.bd.Spec.SealedResources
	var keys []*ecdh.PrivateKey
	if r.SealingKeys != nil {
		keys = r.SealingKeys()
	}
	if !sealedToOneOf(sealed, keys) {
		return outcome.Wait(fleet.ReasonWaitingForSealing, sealingRetry,
			errors.New("waiting for the manager to seal the downstreamResources to this agent's key"))
	}
	if len(sealed.Missing) > 0 {
		return outcome.Stallf(fleet.ReasonDownstreamResourceMissing,
			"downstreamResources: %s not found in namespace %s; nothing is deployed until it exists",
			strings.Join(sealed.Missing, ", "), s.bd.Labels[fleet.BundleNamespaceLabel])
	}
	p, err := sealing.Open(keys, s.bd.Namespace, s.bd.Name, sealed.Data)
	if err != nil {
		return outcome.Stall(fleet.ReasonSealedResourcesUnreadable, err)
	}
	ns := s.key.Namespace
	if err := r.ensureNamespace(ctx, s, ns); err != nil {
		return err
	}
	keep := make([]types.NamespacedName, 0, len(p.Resources))
	for _, res := range p.Resources {
		updated, err := r.applyCopy(ctx, s.bd.Name, ns, res)
		if err != nil {
			return err
		}
		// As in Fleet, a copy that changed deploys the release again: a
		// chart reading it through valuesFrom renders its new values.
		s.copiesChanged = s.copiesChanged || updated
		keep = append(keep, types.NamespacedName{Namespace: ns, Name: res.Kind + "/" + res.Name})
	}
	if v, ok := r.copies.Load(s.bd.Name); !ok || v.(string) != sealed.Data {
		// First time, or a new seal: copies no longer named go.
		if err := r.removeCopies(ctx, s.bd.Name, keep); err != nil {
			return err
		}
		r.copies.Store(s.bd.Name, sealed.Data)
	}
	return nil
}

// sealedToOneOf tells whether sealed is sealed to one of keys.
func sealedToOneOf(sealed *fleet.SealedResources, keys []*ecdh.PrivateKey) bool {
	if sealed == nil || sealed.Data == "" {
		return false
	}
	return slices.ContainsFunc(keys, func(k *ecdh.PrivateKey) bool {
		return k != nil && sealing.Fingerprint(k.PublicKey()) == sealed.Recipient
	})
}

func (r *Reconciler) ensureNamespace(ctx context.Context, s *scope, ns string) error {
	n := &corev1.Namespace{}
	err := r.Local.Get(ctx, types.NamespacedName{Name: ns}, n)
	if !apierrors.IsNotFound(err) {
		return err
	}
	if c := s.bd.Spec.Options.CreateNamespace; c != nil && !*c {
		return outcome.Stallf(fleet.ReasonNamespaceMissing, "namespace %s does not exist and createNamespace is false: the downstreamResources cannot be created", ns)
	}
	n = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := r.Local.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s for the downstreamResources: %w", ns, err)
	}
	return nil
}

// copyLabels mark a copy as the BundleDeployment's.
func (r *Reconciler) copyLabels(bdName string) map[string]string {
	return map[string]string{fleet.DownstreamResourceOwnerLabel: bdName, fleet.DownstreamResourceNamespaceLabel: r.ClusterNamespace}
}

// applyCopy creates or updates one copy, and tells whether it updated one
// that existed; one it did not make is refused. Besides the labels it
// selects its copies by, a copy carries Fleet's
// fleet.BundleDeploymentOwnershipLabel, as Fleet's agent writes it.
func (r *Reconciler) applyCopy(ctx context.Context, bdName, ns string, res sealing.Resource) (bool, error) {
	labels := maps.Clone(res.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, r.copyLabels(bdName))
	labels[fleet.BundleDeploymentOwnershipLabel] = bdName
	meta := metav1.ObjectMeta{Namespace: ns, Name: res.Name, Labels: labels, Annotations: res.Annotations}
	var obj, existing client.Object
	switch res.Kind {
	case "Secret":
		obj = &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretType(res.Type), Data: res.Data}
		existing = &corev1.Secret{}
	case "ConfigMap":
		obj = &corev1.ConfigMap{ObjectMeta: meta, Data: res.StringData, BinaryData: res.Data}
		existing = &corev1.ConfigMap{}
	default:
		return false, outcome.Stallf(fleet.ReasonSealedResourcesUnreadable, "downstreamResources: kind %q is neither Secret nor ConfigMap", res.Kind)
	}
	err := r.Local.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Local.Create(ctx, obj); err != nil {
			return false, fmt.Errorf("creating %s %s/%s from downstreamResources: %w", res.Kind, ns, res.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Created a downstream resource", "kind", res.Kind, "object", klog.KRef(ns, res.Name))
		return false, nil
	case err != nil:
		return false, err
	}
	if owner := existing.GetLabels()[fleet.DownstreamResourceOwnerLabel]; owner != bdName {
		return false, outcome.Stallf(fleet.ReasonNotOwned, "downstreamResources: %s %s/%s exists and was not made for this bundle; delete it or rename the source", res.Kind, ns, res.Name)
	}
	if sameCopy(existing, obj) {
		return false, nil
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	if err := r.Local.Update(ctx, obj); err != nil {
		return false, fmt.Errorf("updating %s %s/%s from downstreamResources: %w", res.Kind, ns, res.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Updated a downstream resource", "kind", res.Kind, "object", klog.KRef(ns, res.Name))
	return true, nil
}

func sameCopy(have, want client.Object) bool {
	if !equality.Semantic.DeepEqual(have.GetLabels(), want.GetLabels()) || !maps.Equal(have.GetAnnotations(), want.GetAnnotations()) {
		return false
	}
	switch h := have.(type) {
	case *corev1.Secret:
		w := want.(*corev1.Secret)
		return h.Type == w.Type && equality.Semantic.DeepEqual(h.Data, w.Data)
	case *corev1.ConfigMap:
		w := want.(*corev1.ConfigMap)
		return maps.Equal(h.Data, w.Data) && equality.Semantic.DeepEqual(h.BinaryData, w.BinaryData)
	}
	return false
}

// removeCopies deletes the copies made for BundleDeployment bdName, in
// every namespace, but those in keep (Namespace, "Kind/name").
func (r *Reconciler) removeCopies(ctx context.Context, bdName string, keep []types.NamespacedName) error {
	sel := client.MatchingLabels(r.copyLabels(bdName))
	var objs []client.Object
	secrets := &corev1.SecretList{}
	if err := r.Local.List(ctx, secrets, sel); err != nil {
		return err
	}
	for i := range secrets.Items {
		if !slices.Contains(keep, types.NamespacedName{Namespace: secrets.Items[i].Namespace, Name: "Secret/" + secrets.Items[i].Name}) {
			objs = append(objs, &secrets.Items[i])
		}
	}
	cms := &corev1.ConfigMapList{}
	if err := r.Local.List(ctx, cms, sel); err != nil {
		return err
	}
	for i := range cms.Items {
		if !slices.Contains(keep, types.NamespacedName{Namespace: cms.Items[i].Namespace, Name: "ConfigMap/" + cms.Items[i].Name}) {
			objs = append(objs, &cms.Items[i])
		}
	}
	var errs []error
	for _, o := range objs {
		if err := client.IgnoreNotFound(r.Local.Delete(ctx, o)); err != nil {
			errs = append(errs, err)
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleted a downstream resource", "object", klog.KObj(o))
	}
	return errors.Join(errs...)
}
