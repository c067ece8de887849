package gitrepo

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretVersions tells a Secret's UID and resourceVersion without its data,
// as a watch of Secrets' metadata knows them: *secretmeta.Watch.
type SecretVersions interface {
	Get(ctx context.Context, key client.ObjectKey) (*metav1.PartialObjectMetadata, error)
}

// secretMemo is what one GitRepo keeps of the Secrets it read, by key (nil
// for one the API server said is missing): it is the GitRepo's own (part of
// its repoState, forgotten with it), so that no GitRepo ever reads through
// another's read, and holds only the few Secrets its spec names. The
// manager's cache holds no tenant Secret (see controllers.CacheOptions).
type secretMemo map[types.NamespacedName]*corev1.Secret

// getSecret reads the Secret key into a Secret that the caller must not
// change. With a watch of Secrets' metadata (r.SecretVersions), the answer
// st had from the API server the last time stands while the watch shows
// the Secret as it was then: the same UID and resourceVersion, or missing
// as it was; otherwise, and without a watch, the API server is asked, as
// every poll did before. A Secret created, changed or deleted since is
// read again as soon as the watch shows it; one the watch does not show
// yet is read from the API server, so a Secret created just before its
// GitRepo is found at once.
func (r *Reconciler) getSecret(ctx context.Context, st *repoState, key types.NamespacedName) (*corev1.Secret, error) {
	if s, known := st.secrets[key]; known && r.SecretVersions != nil {
		m, err := r.SecretVersions.Get(ctx, key)
		switch {
		case err == nil && s != nil && s.UID == m.UID && s.ResourceVersion == m.ResourceVersion:
			return s, nil
		case apierrors.IsNotFound(err) && s == nil:
			return nil, apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
		}
	}
	s := &corev1.Secret{}
	err := r.APIReader.Get(ctx, key, s)
	if r.SecretVersions != nil {
		if st.secrets == nil {
			st.secrets = secretMemo{}
		}
		switch {
		case err == nil:
			st.secrets[key] = s
		case apierrors.IsNotFound(err):
			st.secrets[key] = nil
		default:
			delete(st.secrets, key)
		}
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}
