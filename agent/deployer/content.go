package deployer

import (
	"path"
	"strings"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/content"
)

// Files are a bundle's files by their path relative to the bundle directory.
type Files map[string][]byte

// ContentName returns the Content named by a deploymentID
// ("<contentName>:<options hash>").
func ContentName(deploymentID string) string {
	name, _, _ := strings.Cut(deploymentID, ":")
	return name
}

// DecodeContent checks a Content (content.Decode: size cap and sha256) and
// returns its files.
func DecodeContent(c *fleet.Content) (Files, error) {
	resources, err := content.Decode(c)
	if err != nil {
		return nil, err
	}
	return FilesOf(resources)
}

// FilesOf returns the files of a bundle's resources (spec.resources).
func FilesOf(resources []fleet.BundleResource) (Files, error) {
	files := make(Files, len(resources))
	for _, r := range resources {
		data, err := content.DecodeResource(r)
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
