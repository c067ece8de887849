package deployer

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/bundlereader"
)

// maxContentSize bounds an unpacked Content, so a corrupt or hostile one
// cannot exhaust the agent's memory.
const maxContentSize = 256 << 20

// Files are a bundle's files by their path relative to the bundle directory.
type Files map[string][]byte

// ContentName returns the Content named by a deploymentID
// ("<contentName>:<options hash>").
func ContentName(deploymentID string) string {
	name, _, _ := strings.Cut(deploymentID, ":")
	return name
}

// DecodeContent checks a Content against its sha256sum and returns its files.
func DecodeContent(c *fleet.Content) (Files, error) {
	zr, err := gzip.NewReader(bytes.NewReader(c.Content))
	if err != nil {
		return nil, fmt.Errorf("content %s is not gzip: %w", c.Name, err)
	}
	defer zr.Close()
	raw, err := io.ReadAll(io.LimitReader(zr, maxContentSize+1))
	if err != nil {
		return nil, fmt.Errorf("content %s: %w", c.Name, err)
	}
	if len(raw) > maxContentSize {
		return nil, fmt.Errorf("content %s is larger than %d bytes", c.Name, maxContentSize)
	}
	sum := sha256.Sum256(raw)
	if got := hex.EncodeToString(sum[:]); got != c.SHA256Sum {
		return nil, fmt.Errorf("content %s is corrupt: its sha256 is %s, expected %s", c.Name, got, c.SHA256Sum)
	}
	var m struct {
		Resources []fleet.BundleResource `json:"resources"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("content %s: %w", c.Name, err)
	}
	files := make(Files, len(m.Resources))
	for _, r := range m.Resources {
		data, err := bundlereader.DecodeResource(r)
		if err != nil {
			return nil, err
		}
		files[cleanPath(r.Name)] = data
	}
	return files, nil
}

// cleanPath normalizes a bundle-relative path: no leading "./" or "/".
func cleanPath(p string) string {
	p = path.Clean("/" + strings.TrimPrefix(p, "./"))
	return strings.TrimPrefix(p, "/")
}

// under returns the files below dir, named relative to it.
func (f Files) under(dir string) Files {
	dir = cleanPath(dir)
	if dir == "" || dir == "." {
		return f
	}
	out := Files{}
	for name, data := range f {
		if rest, ok := strings.CutPrefix(name, dir+"/"); ok {
			out[rest] = data
		}
	}
	return out
}
