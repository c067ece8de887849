package bundle

import (
	"context"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// helmOpsContent prepares a HelmOp's bundle (spec.helmOpOptions): it has no
// Content, its agents download the chart helm names. Its versions must be
// exact, as the HelmOp resolved them, so that every cluster gets the same
// chart (Fleet refuses a constraint likewise); with a secretName, the
// Secret is read here and copied next to each BundleDeployment.
func (r *Reconciler) helmOpsContent(ctx context.Context, s *scope) error {
	b := s.bundle
	if err := checkHelmOpsBundle(&b.Spec); err != nil {
		return outcome.Stall(fleet.ReasonInvalidBundle, err)
	}
	// No Content: the deploymentID is ":<options hash>", and the options
	// name the chart and its version.
	s.contentName = ""
	name := b.Spec.HelmOpOptions.SecretName
	if name == "" {
		return nil
	}
	src := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: name}, src); err != nil {
		if apierrors.IsNotFound(err) {
			return outcome.Stallf(fleet.ReasonSecretNotFound, "helmOpOptions.secretName: Secret %s not found in namespace %s: create it or fix the HelmOp's helmSecretName", name, b.Namespace)
		}
		return fmt.Errorf("reading helmOpOptions Secret %s/%s: %w", b.Namespace, name, err)
	}
	data := src.Data
	s.agentSecret = func(bd *fleet.BundleDeployment) *corev1.Secret { return helmOpsSecret(bd, data) }
	return nil
}

// checkHelmOpsBundle checks the spec of a bundle with helmOpOptions: it names
// a remote chart, holds no content, and every version in it is exact.
func checkHelmOpsBundle(spec *fleet.BundleSpec) error {
	if spec.ContentsID != "" || len(spec.Resources) > 0 {
		return fmt.Errorf("spec.helmOpOptions is set with spec.resources or spec.contentsId: the agents download the chart, a HelmOp's bundle holds no content")
	}
	h := spec.Helm
	if h == nil || (h.Repo == "" && !strings.Contains(h.Chart, "://")) {
		return fmt.Errorf("spec.helmOpOptions is set but helm.repo, or a chart URL in helm.chart, does not name the chart the agents download")
	}
	if err := exactVersion(h.Version, "helm.version"); err != nil {
		return err
	}
	for i, t := range spec.Targets {
		if t.Helm != nil {
			if err := exactVersion(t.Helm.Version, fmt.Sprintf("targets[%d].helm.version", i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// exactVersion refuses a version constraint: an agent would resolve it on
// its own, at its own time. A "v" prefix is allowed, as Fleet allows it
// (some repositories list versions so).
func exactVersion(v, field string) error {
	if v == "" {
		return nil
	}
	if _, err := semver.StrictNewVersion(strings.TrimPrefix(v, "v")); err != nil {
		return fmt.Errorf("%s %q is not an exact version: a HelmOp's bundle names the version its HelmOp resolved; check the HelmOp's status", field, v)
	}
	return nil
}

// helmOpsSecret is the copy of a HelmOp's helmSecretName Secret (its data
// given) next to bd, named after it and owned by it: only the keys the
// agent uses, with type fleet.HelmOpsAccessSecretType.
func helmOpsSecret(bd *fleet.BundleDeployment, src map[string][]byte) *corev1.Secret {
	data := map[string][]byte{}
	for _, k := range []string{corev1.BasicAuthUsernameKey, corev1.BasicAuthPasswordKey, fleet.HelmOpsCACertsKey} {
		if v, ok := src[k]; ok {
			data[k] = v
		}
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: bd.Name, Namespace: bd.Namespace,
			Labels: map[string]string{fleet.ManagedLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: fleet.GroupVersion.String(), Kind: "BundleDeployment",
				Name: bd.Name, UID: bd.UID, Controller: ptr.To(true)}},
		},
		Type: fleet.HelmOpsAccessSecretType,
		Data: data,
	}
}

// dropHelmOpsSecrets deletes the HelmOps access Secrets this controller
// wrote next to the BundleDeployments of a HelmOp's bundle that names no
// Secret any more (its helmSecretName was removed): the agents no longer
// use them. Only those it remembers writing are looked at, so a steady pass
// reads nothing.
func (r *Reconciler) dropHelmOpsSecrets(ctx context.Context, s *scope) error {
	if s.bundle.Spec.HelmOpOptions == nil {
		return nil
	}
	var fns []func() error
	for _, bd := range s.existing {
		v, ok := r.ociSecrets.Load(bd.Namespace + "/" + bd.Name)
		if stamp, isString := v.(string); ok && isString && strings.Contains(stamp, "|"+fleet.HelmOpsAccessSecretType+"|") {
			fns = append(fns, func() error { return r.deleteHelmOpsSecret(ctx, bd) })
		}
	}
	return r.runParallel(fns)
}

// deleteHelmOpsSecret deletes the HelmOps access Secret next to bd, gone:
// its owner reference lets the garbage collector delete it too, but not at
// once, and a credential should not outlive its use.
func (r *Reconciler) deleteHelmOpsSecret(ctx context.Context, bd *fleet.BundleDeployment) error {
	r.ociSecrets.Delete(bd.Namespace + "/" + bd.Name)
	cur := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: bd.Namespace, Name: bd.Name}, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	if cur.Type != fleet.HelmOpsAccessSecretType {
		return nil
	}
	if err := client.IgnoreNotFound(r.Client.Delete(ctx, cur, client.Preconditions{UID: &cur.UID})); err != nil {
		return fmt.Errorf("deleting HelmOps access Secret %s/%s: %w", bd.Namespace, bd.Name, err)
	}
	return nil
}
