package bundle

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
)

// Manifest is the uncompressed body of a Content: the bundle's resources.
type Manifest struct {
	Resources []fleet.BundleResource `json:"resources"`
}

// ContentFor returns the name and the Content holding a bundle's resources.
// Identical resources give the same Content, shared by every bundle and
// cluster that deploys them.
func ContentFor(resources []fleet.BundleResource) (string, func() (*fleet.Content, error), error) {
	raw, err := json.Marshal(Manifest{Resources: resources})
	if err != nil {
		return "", nil, err
	}
	name := names.Content(raw)
	build := func() (*fleet.Content, error) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(raw); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(raw)
		return &fleet.Content{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{fleet.ManagedLabel: "true"}},
			Content:    buf.Bytes(),
			SHA256Sum:  hex.EncodeToString(sum[:]),
		}, nil
	}
	return name, build, nil
}

// reconcileContent makes sure the bundle's Content exists.
func (r *Reconciler) reconcileContent(ctx context.Context, s *scope) error {
	name, build, err := ContentFor(s.bundle.Spec.Resources)
	if err != nil {
		return err
	}
	s.contentName = name
	err = r.Client.Get(ctx, client.ObjectKey{Name: name}, &fleet.Content{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	content, err := build()
	if err != nil {
		return err
	}
	if err := r.Client.Create(ctx, content); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating content %s: %w", name, err)
	}
	return nil
}
