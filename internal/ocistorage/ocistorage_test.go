package ocistorage_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/test/chartrepo"
)

func secret(data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ocistorage", Namespace: "ns"}, Type: fleet.OCIStorageSecretType, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestFromSecret(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secret  *corev1.Secret
		wantErr string
		want    ocistorage.Options
	}{
		{name: "full", secret: secret(map[string]string{"reference": "reg.example:5000/fleet/", "username": "w", "password": "p",
			"agentUsername": "r", "agentPassword": "q", "basicHTTP": "true", "insecureSkipTLS": "false"}),
			want: ocistorage.Options{Reference: "reg.example:5000/fleet", Username: "w", Password: "p", AgentUsername: "r", AgentPassword: "q", BasicHTTP: true}},
		{name: "no reference", secret: secret(map[string]string{"username": "w"}), wantErr: `no "reference" key`},
		{name: "scheme", secret: secret(map[string]string{"reference": "oci://reg.example/fleet"}), wantErr: "without a scheme"},
		{name: "wrong type", secret: func() *corev1.Secret {
			s := secret(map[string]string{"reference": "reg"})
			s.Type = corev1.SecretTypeOpaque
			return s
		}(),
			wantErr: "must have type " + fleet.OCIStorageSecretType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o, err := ocistorage.FromSecret(tc.secret)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(o).To(Equal(tc.want))
		})
	}
}

func TestAgentSecretCarriesOnlyTheAgentsCredentials(t *testing.T) {
	g := NewWithT(t)
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "cluster-ns", UID: "u1"}}
	s := ocistorage.Options{Reference: "reg/fleet", Username: "writer", Password: "wp", AgentUsername: "reader", AgentPassword: "rp", BasicHTTP: true}.AgentSecret(bd)
	g.Expect(s.Namespace).To(Equal("cluster-ns"))
	g.Expect(s.Name).To(Equal("app"))
	g.Expect(string(s.Type)).To(Equal(fleet.OCIStorageSecretType))
	g.Expect(s.OwnerReferences).To(HaveLen(1))
	g.Expect(s.OwnerReferences[0].UID).To(BeEquivalentTo("u1"))
	g.Expect(s.Data).To(Equal(map[string][]byte{"reference": []byte("reg/fleet"), "username": []byte("reader"), "password": []byte("rp"), "basicHTTP": []byte("true")}))
	back, err := ocistorage.FromSecret(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Username).To(Equal("reader"))

	// Without agent credentials, agents get the manager's (as in Fleet).
	s = ocistorage.Options{Reference: "reg/fleet", Username: "writer", Password: "wp"}.AgentSecret(bd)
	g.Expect(string(s.Data["username"])).To(Equal("writer"))
}

// TestPushPull runs against a real registry on loopback that scopes each
// user to repository prefixes.
func TestPushPull(t *testing.T) {
	g := NewWithT(t)
	reg := chartrepo.NewAuthRegistry(map[string]chartrepo.Access{
		"manager": {Password: "mp", Push: true, Prefixes: []string{"tenant-a", "tenant-b"}},
		"agent-a": {Password: "ap", Prefixes: []string{"tenant-a"}},
		"agent-b": {Password: "bp", Prefixes: []string{"tenant-b"}},
	})
	defer reg.Close()
	ctx := context.Background()
	raw, _, err := content.Marshal([]fleet.BundleResource{{Name: "cm.yaml", Content: strings.Repeat("x", 4096)}})
	g.Expect(err).NotTo(HaveOccurred())
	name := content.ContentsID(raw)

	mgrA := ocistorage.Options{Reference: reg.Host() + "/tenant-a", Username: "manager", Password: "mp", AgentUsername: "agent-a", AgentPassword: "ap", BasicHTTP: true}
	g.Expect(mgrA.Push(ctx, nil, name, raw)).To(Succeed())
	g.Expect(mgrA.Push(ctx, nil, name, raw)).To(Succeed(), "pushing again is a no-op")
	g.Expect(mgrA.Push(ctx, nil, name, []byte("other"))).To(MatchError(ContainSubstring("digest")))

	agentA := ocistorage.Options{Reference: mgrA.Reference, Username: "agent-a", Password: "ap", BasicHTTP: true}
	got, err := agentA.Pull(ctx, nil, name, 1<<20)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(raw))
	res, err := content.Unmarshal(got)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(HaveLen(1))

	_, err = agentA.Pull(ctx, nil, name, 100)
	g.Expect(err).To(MatchError(ocistorage.ErrTooLarge))

	// The read-only credential cannot push.
	g.Expect(agentA.Push(ctx, nil, name, raw)).NotTo(Succeed())

	// Another tenant's credential cannot read tenant-a's repositories, even
	// knowing the digest, nor through its own prefix.
	agentB := ocistorage.Options{Reference: mgrA.Reference, Username: "agent-b", Password: "bp", BasicHTTP: true}
	_, err = agentB.Pull(ctx, nil, name, 1<<20)
	g.Expect(err).To(HaveOccurred())
	g.Expect(reg.Refused("agent-b")).To(BeNumerically(">", 0))
	agentB.Reference = reg.Host() + "/tenant-b"
	_, err = agentB.Pull(ctx, nil, name, 1<<20)
	g.Expect(err).To(HaveOccurred(), "the content is in tenant-a's repository only")
}

// pushArtifact pushes an artifact with one layer of mediaType holding blob
// to the repository of contentName, as an older manager (or another
// writer) would.
func pushArtifact(t *testing.T, o ocistorage.Options, contentName, mediaType string, blob []byte) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	repo, err := remote.NewRepository(o.Repository(contentName))
	g.Expect(err).NotTo(HaveOccurred())
	repo.PlainHTTP = true
	repo.Client = &auth.Client{Client: http.DefaultClient, Cache: auth.NewCache(),
		Credential: auth.StaticCredential(repo.Reference.Registry, auth.Credential{Username: o.Username, Password: o.Password})}
	layer := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(blob), Size: int64(len(blob))}
	g.Expect(repo.Push(ctx, layer, bytes.NewReader(blob))).To(Succeed())
	m, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, ocistorage.ArtifactType, oras.PackManifestOptions{Layers: []ocispec.Descriptor{layer}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(repo.Tag(ctx, m, ocistorage.Tag)).To(Succeed())
}

// TestLayerIsGzipped checks what goes over the wire: a gzipped layer of
// its own media type, a fraction of the manifest's size for text, and that
// artifacts pushed uncompressed are still read, while a layer that unpacks
// to another manifest is refused.
func TestLayerIsGzipped(t *testing.T) {
	g := NewWithT(t)
	reg := chartrepo.NewAuthRegistry(map[string]chartrepo.Access{"m": {Password: "p", Push: true, Prefixes: []string{"t"}}})
	defer reg.Close()
	ctx := context.Background()
	o := ocistorage.Options{Reference: reg.Host() + "/t", Username: "m", Password: "p", BasicHTTP: true}
	raw, _, err := content.Marshal([]fleet.BundleResource{{Name: "cm.yaml", Content: strings.Repeat("key: value\n", 20000)}})
	g.Expect(err).NotTo(HaveOccurred())
	name := content.ContentsID(raw)

	g.Expect(o.Push(ctx, nil, name, raw)).To(Succeed())
	before := reg.BlobBytesServed()
	got, err := o.Pull(ctx, nil, name, 1<<20)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(raw))
	served := reg.BlobBytesServed() - before
	g.Expect(served).To(BeNumerically("<", len(raw)/10), "the layer is gzipped")
	gz, err := content.Compress(raw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served).To(BeEquivalentTo(len(gz)))

	// An artifact an older manager pushed: the manifest itself as the layer.
	legacyRaw, _, err := content.Marshal([]fleet.BundleResource{{Name: "legacy.yaml", Content: "a: b\n"}})
	g.Expect(err).NotTo(HaveOccurred())
	legacy := content.ContentsID(legacyRaw)
	pushArtifact(t, o, legacy, ocistorage.LayerType, legacyRaw)
	got, err = o.Pull(ctx, nil, legacy, 1<<20)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(legacyRaw))
	// Pushing it again now replaces it with the gzipped artifact.
	g.Expect(o.Push(ctx, nil, legacy, legacyRaw)).To(Succeed())
	got, err = o.Pull(ctx, nil, legacy, 1<<20)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(legacyRaw))

	// The layer's digest is right, but it unpacks to another manifest than
	// the one the BundleDeployment names.
	otherRaw, _, err := content.Marshal([]fleet.BundleResource{{Name: "evil.yaml", Content: "x"}})
	g.Expect(err).NotTo(HaveOccurred())
	otherGz, err := content.Compress(otherRaw)
	g.Expect(err).NotTo(HaveOccurred())
	victim := content.ContentsID([]byte(`{"resources":[]}`))
	pushArtifact(t, o, victim, ocistorage.LayerTypeGzip, otherGz)
	_, err = o.Pull(ctx, nil, victim, 1<<20)
	g.Expect(err).To(MatchError(ContainSubstring("is corrupt")))

	// A layer of another type is not read.
	strange := content.ContentsID([]byte("strange"))
	pushArtifact(t, o, strange, "application/octet-stream", []byte("strange"))
	_, err = o.Pull(ctx, nil, strange, 1<<20)
	g.Expect(err).To(MatchError(ContainSubstring("media type")))

	// A gzip bomb is stopped at the limit, unpacked.
	bombRaw, _, err := content.Marshal([]fleet.BundleResource{{Name: "z", Content: strings.Repeat("0", 4<<20)}})
	g.Expect(err).NotTo(HaveOccurred())
	bomb := content.ContentsID(bombRaw)
	g.Expect(o.Push(ctx, nil, bomb, bombRaw)).To(Succeed())
	_, err = o.Pull(ctx, nil, bomb, 1<<20)
	g.Expect(err).To(MatchError(ocistorage.ErrTooLarge))
}
