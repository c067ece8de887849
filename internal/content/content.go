package content

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
)

// MaxSize bounds an unpacked Content, so that a corrupt or hostile one cannot
// exhaust the agent's memory.
const MaxSize = 256 << 20

// Manifest is the uncompressed body of a Content: a bundle's resources.
type Manifest struct {
	Resources []fleet.BundleResource `json:"resources"`
}

// Encode returns the name of the Content holding resources and a function
// that builds it. The name alone is cheap; building compresses, which the
// caller does only when the Content does not exist yet. Identical resources
// give the same Content, shared by every bundle and cluster that deploys
// them.
func Encode(resources []fleet.BundleResource) (string, func() (*fleet.Content, error), error) {
	raw, name, err := Marshal(resources)
	if err != nil {
		return "", nil, err
	}
	build := func() (*fleet.Content, error) {
		gz, err := Compress(raw)
		if err != nil {
			return nil, fmt.Errorf("compressing content %s: %w", name, err)
		}
		sum := sha256.Sum256(raw)
		return &fleet.Content{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{fleet.ManagedLabel: "true"}},
			Content:    gz,
			SHA256Sum:  hex.EncodeToString(sum[:]),
		}, nil
	}
	return name, build, nil
}

// Compress gzips a manifest, as a Content and an OCI storage artifact
// hold it. The output depends only on raw (no name, no time in the
// header), so that the same content always has the same digest.
func Compress(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	defer func() {
		// Back to the pool without holding buf (a large artifact's bytes).
		zw.Reset(io.Discard)
		gzipWriters.Put(zw)
	}()
	// Reset makes it what gzip.NewWriter returns, writing to buf: the
	// same bytes out, without allocating and clearing a compressor's
	// state (most of the cost of compressing a small manifest) each time.
	zw.Reset(&buf)
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gzipWriters are the gzip writers of Compress, reused.
var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

// Decode unpacks a Content, checks it against its sha256sum and returns its
// resources. A Content larger than MaxSize unpacked, not gzip, or whose sum
// does not match is an error: it was damaged or not written by a manager.
func Decode(c *fleet.Content) ([]fleet.BundleResource, error) {
	return decode(c, MaxSize)
}

func decode(c *fleet.Content, limit int) ([]fleet.BundleResource, error) {
	zr, err := gzip.NewReader(bytes.NewReader(c.Content))
	if err != nil {
		return nil, fmt.Errorf("content %s is not gzip: %w", c.Name, err)
	}
	defer zr.Close()
	raw, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("content %s: %w", c.Name, err)
	}
	if len(raw) > limit {
		return nil, fmt.Errorf("content %s is larger than %d bytes", c.Name, limit)
	}
	sum := sha256.Sum256(raw)
	if got := hex.EncodeToString(sum[:]); got != c.SHA256Sum {
		return nil, fmt.Errorf("content %s is corrupt: its sha256 is %s, expected %s", c.Name, got, c.SHA256Sum)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("content %s: %w", c.Name, err)
	}
	return m.Resources, nil
}

// Marshal returns the uncompressed manifest of resources (a Content and an
// OCI storage artifact hold it gzipped) and the name of its Content.
func Marshal(resources []fleet.BundleResource) ([]byte, string, error) {
	raw, err := json.Marshal(Manifest{Resources: resources})
	if err != nil {
		return nil, "", fmt.Errorf("encoding the bundle's resources: %w", err)
	}
	return raw, names.Content(raw), nil
}

// ContentsID is the contentsId of a bundle whose manifest raw is stored in
// an OCI registry: "s-" and the whole sha256 of raw, which the agent checks
// after unpacking the artifact's layer (a Content name may be shortened to
// fit a label).
func ContentsID(raw []byte) string {
	sum := sha256.Sum256(raw)
	return "s-" + hex.EncodeToString(sum[:])
}

// Unmarshal returns the resources of raw, a manifest whose digest the
// caller checked.
func Unmarshal(raw []byte) ([]fleet.BundleResource, error) {
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decoding a bundle's content: %w", err)
	}
	return m.Resources, nil
}
