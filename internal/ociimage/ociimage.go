// Package ociimage builds the manager's and the agent's container images as
// OCI image layouts, in Go and without a container daemon: a static binary on
// a minimal base made here (an /etc/passwd with the non-root user 65532, the
// build machine's CA certificates, /tmp), run as that user. The same inputs
// give the same digest: every file has a fixed owner and time, and the image's
// creation time is given (SOURCE_DATE_EPOCH, the commit's time). `make images`
// writes one layout per image under bin/images; a registry tool copies it
// on, e.g. `skopeo copy oci:bin/images/fleet-manager docker://REGISTRY/fleet-manager:TAG`.
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRootUID is the user (and group) the images run as, the one distroless
// images name "nonroot" and the install manifests' runAsUser.
const NonRootUID = 65532

// DefaultCACerts is where Debian and its derivatives keep the CA bundle.
const DefaultCACerts = "/etc/ssl/certs/ca-certificates.crt"

// Options describe one image.
type Options struct {
	// Binary is the path of the static (CGO_ENABLED=0) binary to run.
	Binary string
	// Entrypoint is the binary's path in the image, e.g. /fleet-manager.
	Entrypoint string
	// Extra are more static binaries, put beside the entrypoint under their
	// own names (the agent's fleet-agent-deploy beside fleet-agent).
	Extra []string
	// Refs name the image in the layout's index.json
	// (org.opencontainers.image.ref.name), e.g.
	// ghcr.io/gitfleet/fleet-manager:latest.
	Refs []string
	// Labels are the image's config labels (org.opencontainers.image.*).
	Labels map[string]string
	// OS and Arch of the binary (default linux, amd64).
	OS, Arch string
	// Created is the image's creation time and every file's modification
	// time; fixed, so that a rebuild gives the same digest.
	Created time.Time
	// CACerts is the CA bundle copied into the image (default
	// DefaultCACerts), so that the binary can verify TLS servers such as git
	// hosts and chart repositories.
	CACerts string
}

// Build writes the image as an OCI image layout into dir (replacing what is
// there) and returns the image's manifest digest.
func Build(dir string, o Options) (v1.Hash, error) {
	img, err := Image(o)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	platform := v1.Platform{OS: o.OS, Architecture: o.Arch}
	for _, ref := range o.Refs {
		if err := p.AppendImage(img, layout.WithPlatform(platform),
			layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
			return v1.Hash{}, err
		}
	}
	if len(o.Refs) == 0 {
		if err := p.AppendImage(img, layout.WithPlatform(platform)); err != nil {
			return v1.Hash{}, err
		}
	}
	return img.Digest()
}

// Image assembles the image: a base layer and a layer with the binary.
func Image(o Options) (v1.Image, error) {
	if o.Binary == "" || o.Entrypoint == "" || !path.IsAbs(o.Entrypoint) {
		return nil, fmt.Errorf("an image needs a binary and an absolute entrypoint path (got %q, %q)", o.Binary, o.Entrypoint)
	}
	if o.OS == "" {
		o.OS = "linux"
	}
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	if o.CACerts == "" {
		o.CACerts = DefaultCACerts
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("reading the CA certificates to put in the image: %w (give another bundle with the CA certificates option)", err)
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	created := o.Created.UTC().Truncate(time.Second)

	base, err := layer(created, baseFiles(certs))
	if err != nil {
		return nil, err
	}
	files := []file{{name: o.Entrypoint[1:], mode: 0o755, data: bin}}
	copied := "COPY " + path.Base(o.Binary) + " " + o.Entrypoint
	for _, extra := range o.Extra {
		data, err := os.ReadFile(extra) //nolint:gosec // G304: a binary the image's builder named in Options.Extra
		if err != nil {
			return nil, err
		}
		name := path.Join(path.Dir(o.Entrypoint), filepath.Base(extra))
		files = append(files, file{name: name[1:], mode: 0o755, data: data})
		copied += ", " + filepath.Base(extra) + " " + name
	}
	app, err := layer(created, files)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "base: /etc/passwd, /etc/group, CA certificates, /tmp", Comment: "fleet"}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: created}, CreatedBy: copied, Comment: "fleet"}},
	)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = o.OS, o.Arch
	cfg.Created = v1.Time{Time: created}
	cfg.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", NonRootUID, NonRootUID),
		Entrypoint: []string{o.Entrypoint},
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
			"HOME=/home/nonroot",
		},
		WorkingDir: "/home/nonroot",
		Labels:     o.Labels,
	}
	return mutate.ConfigFile(img, cfg)
}

type file struct {
	name string
	mode int64
	uid  int
	dir  bool
	data []byte
}

// baseFiles is the minimal root file system a static Go binary needs: who
// the users are (so that the non-root user has a name and a home), the CA
// certificates, a writable /tmp, and the resolver order.
func baseFiles(certs []byte) []file {
	return []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl", mode: 0o755, dir: true},
		{name: "etc/ssl/certs", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, uid: NonRootUID, dir: true},
		{name: "root", mode: 0o700, dir: true},
		{name: "tmp", mode: 0o1777, dir: true},
	}
}

// layer writes files into an uncompressed tar with fixed owners and times,
// sorted by name, and makes it a gzip-compressed OCI layer.
func layer(mtime time.Time, files []file) (v1.Layer, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: mtime}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
