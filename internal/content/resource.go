package content

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"unicode/utf8"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// The encoding of one file of a bundle (a BundleResource): the manager
// encodes each file it reads (internal/bundlereader), and fleet-agent-deploy
// decodes them (agent/deployer), so the two sides share it here, beside the
// Content that carries them.
const (
	// EncodingBase64Gz is the encoding of resources stored gzipped, then
	// base64 encoded.
	EncodingBase64Gz = "base64+gz"
	// CompressAbove is the size above which text files are compressed too,
	// to keep Bundles small.
	CompressAbove = 64 * 1024
)

// EncodeResource makes the resource of one file: its text as is, or, for
// binary (not UTF-8) and large files, gzipped and base64 encoded.
func EncodeResource(name string, data []byte) (fleet.BundleResource, error) {
	if len(data) <= CompressAbove && utf8.Valid(data) {
		return fleet.BundleResource{Name: name, Content: string(data)}, nil
	}
	gz, err := Compress(data)
	if err != nil {
		return fleet.BundleResource{}, err
	}
	return fleet.BundleResource{
		Name:     name,
		Content:  base64.StdEncoding.EncodeToString(gz),
		Encoding: EncodingBase64Gz,
	}, nil
}

// DecodeResource returns the bytes of a resource's file.
func DecodeResource(r fleet.BundleResource) ([]byte, error) {
	switch r.Encoding {
	case "":
		return []byte(r.Content), nil
	case EncodingBase64Gz:
		gz, err := base64.StdEncoding.DecodeString(r.Content)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.Name, err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.Name, err)
		}
		defer zr.Close()
		data, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.Name, err)
		}
		return data, nil
	default:
		return nil, fmt.Errorf("resource %s: unknown encoding %q", r.Name, r.Encoding)
	}
}
