package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Labels and data key of Helm v3's release Secrets.
const (
	ownerLabel  = "owner"
	nameLabel   = "name"
	statusLabel = "status"
	dataKey     = "release"
	secretType  = "helm.sh/release.v1" //nolint:gosec // G101: the type of Helm's release Secrets, not a credential
)

// Reader reads release records from the Secrets Helm stores them in.
type Reader struct {
	// Client reads Secrets of the agent's cluster, directly (not cached:
	// the agent keeps no Secrets in memory).
	Client client.Reader
}

// Last returns the latest revision of a release; nil when there is none.
func (r Reader) Last(ctx context.Context, key Key) (*Release, error) {
	all, err := r.query(ctx, key.Namespace, client.MatchingLabels{ownerLabel: "helm", nameLabel: key.Name})
	return latest(all), err
}

// Deployed returns the latest deployed revision of a release; nil when none
// is deployed.
func (r Reader) Deployed(ctx context.Context, key Key) (*Release, error) {
	all, err := r.query(ctx, key.Namespace, client.MatchingLabels{ownerLabel: "helm", nameLabel: key.Name, statusLabel: string(StatusDeployed)})
	return latest(all), err
}

// Owned returns the latest revision of every release the agent of
// clusterNamespace deployed (those recorded with its cluster namespace), in
// any namespace.
func (r Reader) Owned(ctx context.Context, clusterNamespace string) ([]*Release, error) {
	all, err := r.query(ctx, "", client.MatchingLabels{ownerLabel: "helm", fleet.ManagedLabel: "true", fleet.ClusterNamespaceLabel: clusterNamespace})
	if err != nil {
		return nil, err
	}
	byKey := map[Key]*Release{}
	for _, rel := range all {
		if cur := byKey[rel.Key()]; cur == nil || rel.Version > cur.Version {
			byKey[rel.Key()] = rel
		}
	}
	out := make([]*Release, 0, len(byKey))
	for _, rel := range byKey {
		out = append(out, rel)
	}
	return out, nil
}

func latest(all []*Release) *Release {
	var last *Release
	for _, rel := range all {
		if last == nil || rel.Version > last.Version {
			last = rel
		}
	}
	return last
}

// query decodes the release Secrets matching labels in namespace (every
// namespace when ""). A record that does not decode is skipped, as Helm
// skips it.
func (r Reader) query(ctx context.Context, namespace string, labels client.MatchingLabels) ([]*Release, error) {
	list := &corev1.SecretList{}
	if err := r.Client.List(ctx, list, client.InNamespace(namespace), labels); err != nil {
		return nil, fmt.Errorf("reading Helm release records: %w", err)
	}
	out := make([]*Release, 0, len(list.Items))
	for i := range list.Items {
		s := &list.Items[i]
		if s.Type != secretType && s.Type != "" {
			continue
		}
		rel, err := Decode(s.Data[dataKey])
		if err != nil {
			continue
		}
		if rel.Namespace == "" {
			rel.Namespace = s.Namespace
		}
		out = append(out, rel)
	}
	return out, nil
}

// gzipMagic starts gzipped data.
var gzipMagic = []byte{0x1f, 0x8b, 0x08}

// Decode reads a release record: base64 of the release's JSON, gzipped (as
// Helm writes it) or not (as older Helm versions did).
func Decode(data []byte) (*Release, error) {
	raw, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		return nil, fmt.Errorf("decoding release record: %w", err)
	}
	if bytes.HasPrefix(raw, gzipMagic) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("decompressing release record: %w", err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("decompressing release record: %w", err)
		}
	}
	rel := &Release{}
	if err := json.Unmarshal(raw, rel); err != nil {
		return nil, fmt.Errorf("decoding release record: %w", err)
	}
	return rel, nil
}
