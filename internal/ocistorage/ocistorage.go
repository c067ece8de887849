package ocistorage

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"oras.land/oras-go/v2"
	orascontent "oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/content"
)

// Media types of the artifact: an empty config, as OCI artifacts without a
// config have, and the content's manifest as its one layer, gzipped
// (LayerTypeGzip). Artifacts pushed before compression hold it as is
// (LayerType); agents read both.
const (
	ArtifactType  = "application/vnd.fleet.cattle.io.bundle.content.v1"
	LayerType     = "application/vnd.fleet.cattle.io.bundle.content.v1+json"
	LayerTypeGzip = "application/vnd.fleet.cattle.io.bundle.content.v1.json+gzip"
	contentPrefix = "s-"
	// Tag is the tag every content artifact carries, as in Fleet: the
	// repository is per content, so the tag never moves.
	Tag = "latest"
)

// Options are a registry and how to reach it, read from an OCI storage
// Secret.
type Options struct {
	// Reference is the registry host and repository prefix.
	Reference string
	// Username and Password authenticate; empty for anonymous access.
	Username, Password string
	// AgentUsername and AgentPassword are what agents get; empty, they get
	// Username and Password.
	AgentUsername, AgentPassword string
	// InsecureSkipTLS turns off TLS verification; BasicHTTP speaks HTTP.
	InsecureSkipTLS, BasicHTTP bool
}

// FromSecret reads the Options of an OCI storage Secret. A Secret of
// another type, or without a reference, is refused with a message that
// says what to fix.
func FromSecret(s *corev1.Secret) (Options, error) {
	if s.Type != fleet.OCIStorageSecretType {
		return Options{}, fmt.Errorf("secret %s/%s has type %q: OCI storage Secrets must have type %s", s.Namespace, s.Name, s.Type, fleet.OCIStorageSecretType)
	}
	get := func(k string) string { return strings.TrimSpace(string(s.Data[k])) }
	o := Options{
		Reference:       strings.TrimSuffix(get(fleet.OCIStorageReferenceKey), "/"),
		Username:        get(fleet.OCIStorageUsernameKey),
		Password:        string(s.Data[fleet.OCIStoragePasswordKey]),
		AgentUsername:   get(fleet.OCIStorageAgentUsernameKey),
		AgentPassword:   string(s.Data[fleet.OCIStorageAgentPasswordKey]),
		InsecureSkipTLS: get(fleet.OCIStorageInsecureSkipTLSKey) == "true",
		BasicHTTP:       get(fleet.OCIStorageBasicHTTPKey) == "true",
	}
	if o.Reference == "" {
		return Options{}, fmt.Errorf("secret %s/%s has no %q key: set it to the registry host and repository prefix, e.g. registry.example.com/fleet", s.Namespace, s.Name, fleet.OCIStorageReferenceKey)
	}
	if strings.Contains(o.Reference, "://") {
		return Options{}, fmt.Errorf("secret %s/%s: %q is %q: give the registry without a scheme (oci:// or https://)", s.Namespace, s.Name, fleet.OCIStorageReferenceKey, o.Reference)
	}
	if _, err := remote.NewRepository(o.Reference + "/" + contentPrefix + strings.Repeat("0", 64)); err != nil {
		return Options{}, fmt.Errorf("secret %s/%s: %q is not a registry and repository prefix: %w", s.Namespace, s.Name, fleet.OCIStorageReferenceKey, err)
	}
	return o, nil
}

// AgentSecret is the Secret the manager writes next to a BundleDeployment
// (same name and namespace, owned by it): the registry and the agent's
// credentials only. The manager's own (push) credentials stay in the
// registry Secret, unless no agent credentials are given (as in Fleet).
func (o Options) AgentSecret(bd *fleet.BundleDeployment) *corev1.Secret {
	user, pass := o.AgentUsername, o.AgentPassword
	if user == "" && pass == "" {
		user, pass = o.Username, o.Password
	}
	data := map[string][]byte{fleet.OCIStorageReferenceKey: []byte(o.Reference)}
	if user != "" || pass != "" {
		data[fleet.OCIStorageUsernameKey], data[fleet.OCIStoragePasswordKey] = []byte(user), []byte(pass)
	}
	if o.InsecureSkipTLS {
		data[fleet.OCIStorageInsecureSkipTLSKey] = []byte("true")
	}
	if o.BasicHTTP {
		data[fleet.OCIStorageBasicHTTPKey] = []byte("true")
	}
	t := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: bd.Name, Namespace: bd.Namespace,
			Labels: map[string]string{fleet.ManagedLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: fleet.GroupVersion.String(), Kind: "BundleDeployment",
				Name: bd.Name, UID: bd.UID, Controller: &t}},
		},
		Type: fleet.OCIStorageSecretType,
		Data: data,
	}
}

// Digest is the sha256 digest of the manifest of the content named
// contentName, which Pull checks (and the layer's digest in artifacts
// pushed uncompressed).
func Digest(contentName string) (digest.Digest, error) {
	hexSum, ok := strings.CutPrefix(contentName, contentPrefix)
	if !ok || len(hexSum) != 64 {
		return "", fmt.Errorf("content name %q is not %s<sha256>", contentName, contentPrefix)
	}
	if _, err := hex.DecodeString(hexSum); err != nil {
		return "", fmt.Errorf("content name %q is not %s<sha256>: %w", contentName, contentPrefix, err)
	}
	return digest.NewDigestFromEncoded(digest.SHA256, hexSum), nil
}

// Repository is the repository of a content in the registry.
func (o Options) Repository(contentName string) string {
	return o.Reference + "/" + contentName
}

// repository is the content's repository, reached over base (nil: a new
// transport) with user and pass, TLS verification off when asked.
func (o Options) repository(contentName string, base *http.Transport, user, pass string) (*remote.Repository, error) {
	repo, err := remote.NewRepository(o.Repository(contentName))
	if err != nil {
		return nil, fmt.Errorf("content %s: %w", contentName, err)
	}
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	} else {
		base = base.Clone()
	}
	if o.InsecureSkipTLS {
		if base.TLSClientConfig == nil {
			base.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		base.TLSClientConfig.InsecureSkipVerify = true
	}
	c := &auth.Client{Client: &http.Client{Transport: base}, Cache: auth.NewCache()}
	if user != "" || pass != "" {
		c.Credential = auth.StaticCredential(repo.Reference.Registry, auth.Credential{Username: user, Password: pass})
	}
	repo.Client, repo.PlainHTTP = c, o.BasicHTTP
	return repo, nil
}

// Push stores raw, the manifest of the content named contentName, in the
// registry with the manager's credentials, over transport (nil: the
// default): the gzipped manifest as a blob, unless the registry has it, and
// an artifact manifest tagged Tag that names it and keeps it from the
// registry's garbage collection.
func (o Options) Push(ctx context.Context, transport *http.Transport, contentName string, raw []byte) error {
	d, err := Digest(contentName)
	if err != nil {
		return err
	}
	if got := digest.FromBytes(raw); got != d {
		return fmt.Errorf("content %s: its manifest has digest %s", contentName, got)
	}
	gz, err := content.Compress(raw)
	if err != nil {
		return fmt.Errorf("compressing content %s: %w", contentName, err)
	}
	repo, err := o.repository(contentName, transport, o.Username, o.Password)
	if err != nil {
		return err
	}
	layer := ocispec.Descriptor{MediaType: LayerTypeGzip, Digest: digest.FromBytes(gz), Size: int64(len(gz))}
	fail := func(err error) error {
		return fmt.Errorf("pushing content %s to %s: %w", contentName, o.Reference, err)
	}
	has, err := repo.Exists(ctx, layer)
	if err != nil {
		return fail(err)
	}
	if !has {
		if err := repo.Push(ctx, layer, bytes.NewReader(gz)); err != nil {
			return fail(err)
		}
	}
	m, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, ArtifactType, oras.PackManifestOptions{Layers: []ocispec.Descriptor{layer}})
	if err != nil {
		return fail(err)
	}
	if err := repo.Tag(ctx, m, Tag); err != nil {
		return fail(err)
	}
	return nil
}

// ErrTooLarge is returned by Pull for a content larger than its limit.
var ErrTooLarge = errors.New("content larger than the limit")

// maxArtifactManifest bounds the artifact manifest read: one layer and an
// empty config take well under a KiB.
const maxArtifactManifest = 64 << 10

// Pull reads the manifest of the content named contentName from the
// registry, with the credentials in o (an agent's Secret), over transport
// (nil: the default), and checks it: at most limit bytes, compressed and
// uncompressed, and its sha256 the content's name, whatever the artifact
// says. It resolves the artifact tagged Tag and reads its one layer, gzipped
// or not.
func (o Options) Pull(ctx context.Context, transport *http.Transport, contentName string, limit int64) ([]byte, error) {
	d, err := Digest(contentName)
	if err != nil {
		return nil, err
	}
	repo, err := o.repository(contentName, transport, o.Username, o.Password)
	if err != nil {
		return nil, err
	}
	fail := func(err error) error {
		return fmt.Errorf("pulling content %s from %s: %w", contentName, o.Reference, err)
	}
	layer, err := artifactLayer(ctx, repo)
	if err != nil {
		return nil, fail(err)
	}
	if layer.Size > limit {
		return nil, fail(fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, layer.Size, limit))
	}
	rc, err := repo.Blobs().Fetch(ctx, layer)
	if err != nil {
		return nil, fail(err)
	}
	defer rc.Close()
	// The blob is checked against the layer's digest as it is read; the
	// manifest it unpacks to, against the content's name below.
	blob, err := orascontent.ReadAll(rc, layer)
	if err != nil {
		return nil, fail(err)
	}
	raw := blob
	if layer.MediaType == LayerTypeGzip {
		zr, err := gzip.NewReader(bytes.NewReader(blob))
		if err != nil {
			return nil, fail(fmt.Errorf("layer is not gzip: %w", err))
		}
		raw, err = io.ReadAll(io.LimitReader(zr, limit+1))
		if err != nil {
			return nil, fail(fmt.Errorf("unpacking the layer: %w", err))
		}
		if int64(len(raw)) > limit {
			return nil, fail(fmt.Errorf("%w: unpacked, the limit is %d", ErrTooLarge, limit))
		}
	}
	sum := sha256.Sum256(raw)
	if got := hex.EncodeToString(sum[:]); got != d.Encoded() {
		return nil, fmt.Errorf("content %s from %s is corrupt: its sha256 is %s", contentName, o.Reference, got)
	}
	return raw, nil
}

// artifactLayer is the one layer of the content artifact tagged Tag in
// repo: the manifest, gzipped or not.
func artifactLayer(ctx context.Context, repo *remote.Repository) (ocispec.Descriptor, error) {
	desc, rc, err := repo.Manifests().FetchReference(ctx, Tag)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	defer rc.Close()
	if desc.Size > maxArtifactManifest {
		return ocispec.Descriptor{}, fmt.Errorf("artifact manifest of %d bytes: not a content artifact", desc.Size)
	}
	b, err := orascontent.ReadAll(rc, desc)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("artifact manifest: %w", err)
	}
	if len(m.Layers) != 1 {
		return ocispec.Descriptor{}, fmt.Errorf("artifact has %d layers, a content artifact has one", len(m.Layers))
	}
	l := m.Layers[0]
	if l.MediaType != LayerTypeGzip && l.MediaType != LayerType {
		return ocispec.Descriptor{}, fmt.Errorf("layer has media type %q, not %s nor %s", l.MediaType, LayerTypeGzip, LayerType)
	}
	return l, nil
}
