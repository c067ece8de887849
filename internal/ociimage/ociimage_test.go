package ociimage_test

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/internal/ociimage"
)

// entry is one file read back from an image layer.
type entry struct {
	hdr  *tar.Header
	data string
}

func readLayers(g Gomega, img v1.Image) map[string]entry {
	layers, err := img.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	files := map[string]entry{}
	for _, l := range layers {
		mt, err := l.MediaType()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(mt)).To(Equal("application/vnd.oci.image.layer.v1.tar+gzip"))
		rc, err := l.Uncompressed()
		g.Expect(err).NotTo(HaveOccurred())
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			g.Expect(err).NotTo(HaveOccurred())
			b, err := io.ReadAll(tr)
			g.Expect(err).NotTo(HaveOccurred())
			files[strings.TrimSuffix(h.Name, "/")] = entry{hdr: h, data: string(b)}
		}
		g.Expect(rc.Close()).To(Succeed())
	}
	return files
}

// A small image is written as an OCI image layout and read back from disk:
// the layout is valid (every blob matches its digest), the index names the
// image, the config runs the entrypoint as a non-root user that exists in the
// image, with its labels, and the layers hold the binary and the base files.
// Built twice from the same inputs, it has the same digest.
func TestBuildLayoutAndReadBack(t *testing.T) {
	g := NewWithT(t)
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "hello")
	g.Expect(os.WriteFile(bin, []byte("\x7fELF not really a binary"), 0o755)).To(Succeed())
	certs := filepath.Join(tmp, "ca.crt")
	g.Expect(os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644)).To(Succeed())
	helper := filepath.Join(tmp, "hello-helper")
	g.Expect(os.WriteFile(helper, []byte("\x7fELF the helper"), 0o755)).To(Succeed())
	o := ociimage.Options{
		Binary: bin, Entrypoint: "/hello", Extra: []string{helper}, CACerts: certs, Arch: "arm64",
		Refs:    []string{"example.com/hello:latest", "example.com/hello:v1"},
		Labels:  map[string]string{"org.opencontainers.image.title": "hello", "org.opencontainers.image.version": "v1"},
		Created: time.Unix(1700000000, 0),
	}
	dir := filepath.Join(tmp, "layout")
	digest, err := ociimage.Build(dir, o)
	g.Expect(err).NotTo(HaveOccurred())

	// The layout's marker file, as the OCI image-layout spec has it.
	marker, err := os.ReadFile(filepath.Join(dir, "oci-layout"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(marker)).To(MatchJSON(`{"imageLayoutVersion":"1.0.0"}`))

	idx, err := layout.ImageIndexFromPath(dir)
	g.Expect(err).NotTo(HaveOccurred())
	im, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(im.Manifests).To(HaveLen(2))
	refs := make([]string, 0, len(im.Manifests))
	for _, d := range im.Manifests {
		g.Expect(d.Digest).To(Equal(digest))
		g.Expect(d.Platform).NotTo(BeNil())
		g.Expect(d.Platform.Architecture).To(Equal("arm64"))
		refs = append(refs, d.Annotations["org.opencontainers.image.ref.name"])
	}
	g.Expect(refs).To(ConsistOf("example.com/hello:latest", "example.com/hello:v1"))

	img, err := idx.Image(digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(validate.Image(img)).To(Succeed(), "every blob matches its digest and size")
	mt, err := img.MediaType()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(mt)).To(Equal("application/vnd.oci.image.manifest.v1+json"))

	raw, err := img.RawConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	var cfg v1.ConfigFile
	g.Expect(json.Unmarshal(raw, &cfg)).To(Succeed())
	g.Expect(cfg.OS).To(Equal("linux"))
	g.Expect(cfg.Architecture).To(Equal("arm64"))
	g.Expect(cfg.Created.Unix()).To(Equal(int64(1700000000)))
	g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/hello"}))
	g.Expect(cfg.Config.Labels).To(Equal(o.Labels))
	uid, gid, ok := strings.Cut(cfg.Config.User, ":")
	g.Expect(ok).To(BeTrue(), "user is uid:gid, numeric so runAsNonRoot can check it: %q", cfg.Config.User)
	g.Expect(uid).To(Equal(strconv.Itoa(ociimage.NonRootUID)))
	g.Expect(gid).To(Equal(strconv.Itoa(ociimage.NonRootUID)))

	files := readLayers(g, img)
	hello := files["hello"]
	g.Expect(hello.hdr).NotTo(BeNil(), "the binary is in the image")
	g.Expect(hello.data).To(Equal("\x7fELF not really a binary"))
	g.Expect(hello.hdr.Mode & 0o777).To(Equal(int64(0o755)))
	g.Expect(hello.hdr.Uid).To(Equal(0), "the binary belongs to root: the user that runs it cannot replace it")
	g.Expect(files["hello-helper"].data).To(Equal("\x7fELF the helper"), "the extra binary is beside the entrypoint")
	g.Expect(files["hello-helper"].hdr.Mode & 0o777).To(Equal(int64(0o755)))
	g.Expect(files["etc/passwd"].data).To(ContainSubstring("nonroot:x:65532:65532:"))
	g.Expect(files["etc/group"].data).To(ContainSubstring("nonroot:x:65532:"))
	g.Expect(files["etc/ssl/certs/ca-certificates.crt"].data).To(ContainSubstring("BEGIN CERTIFICATE"))
	g.Expect(files["home/nonroot"].hdr.Uid).To(Equal(ociimage.NonRootUID))
	g.Expect(files["tmp"].hdr.Mode & 0o7777).To(Equal(int64(0o1777)))
	for name, f := range files {
		g.Expect(f.hdr.ModTime.Unix()).To(Equal(int64(1700000000)), "%s has the fixed time", name)
	}

	// Reproducible: the same inputs into another directory give the same digest.
	again, err := ociimage.Build(filepath.Join(tmp, "again"), o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(digest))
	// Another binary gives another image.
	g.Expect(os.WriteFile(bin, []byte("\x7fELF another"), 0o755)).To(Succeed())
	other, err := ociimage.Build(filepath.Join(tmp, "other"), o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other).NotTo(Equal(digest))
}

// Missing inputs are refused with a message that says what to give.
func TestBuildRefusesMissingInputs(t *testing.T) {
	g := NewWithT(t)
	tmp := t.TempDir()
	_, err := ociimage.Build(filepath.Join(tmp, "x"), ociimage.Options{Binary: "/nonexistent", Entrypoint: "relative"})
	g.Expect(err).To(MatchError(ContainSubstring("absolute entrypoint")))
	bin := filepath.Join(tmp, "b")
	g.Expect(os.WriteFile(bin, []byte("x"), 0o755)).To(Succeed())
	_, err = ociimage.Build(filepath.Join(tmp, "x"), ociimage.Options{Binary: bin, Entrypoint: "/b", CACerts: filepath.Join(tmp, "none.crt")})
	g.Expect(err).To(MatchError(ContainSubstring("CA certificates")))
	g.Expect(filepath.Join(tmp, "x")).NotTo(BeADirectory(), "nothing written when the inputs are wrong")
}
