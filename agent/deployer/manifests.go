package deployer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Style is how a bundle's files become a release.
type Style string

// The bundle styles, as fleet-api.md defines them.
const (
	// StyleHelm: a chart at helm.chart or a Chart.yaml at the bundle's root.
	StyleHelm Style = "helm"
	// StyleKustomize: a kustomization at kustomize.dir (or the root).
	StyleKustomize Style = "kustomize"
	// StyleManifests: plain YAML or JSON manifests, with overlays.
	StyleManifests Style = "manifests"
)

var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Layout says where a bundle's chart and kustomization are.
type Layout struct {
	Style Style
	// ChartPath is the chart directory, or archive, in the bundle ("" = root).
	ChartPath string
	// ChartArchive tells that ChartPath is a packaged chart (.tgz).
	ChartArchive bool
	// KustomizeDir is the kustomization directory ("" = root), when
	// HasKustomize.
	KustomizeDir string
	HasKustomize bool
}

// Detect works out a bundle's layout from its files and options.
func Detect(files Files, opts fleet.BundleDeploymentOptions) (Layout, error) {
	l := Layout{Style: StyleManifests}
	if opts.Kustomize != nil && opts.Kustomize.Dir != "" {
		l.KustomizeDir = cleanPath(opts.Kustomize.Dir)
		if !hasKustomization(files, l.KustomizeDir) {
			return l, fmt.Errorf("kustomize.dir %q: no kustomization.yaml in the bundle there", opts.Kustomize.Dir)
		}
		l.HasKustomize = true
	} else if hasKustomization(files, "") {
		l.HasKustomize = true
	}
	if opts.Helm != nil && opts.Helm.Chart != "" {
		c := cleanPath(opts.Helm.Chart)
		switch {
		case files[c] != nil && (strings.HasSuffix(c, ".tgz") || strings.HasSuffix(c, ".tar.gz")):
			l.Style, l.ChartPath, l.ChartArchive = StyleHelm, c, true
			return l, nil
		case files[join(c, "Chart.yaml")] != nil:
			l.Style, l.ChartPath = StyleHelm, c
			return l, nil
		}
		return l, fmt.Errorf("helm.chart %q: the bundle has no chart there (no %s)", opts.Helm.Chart, join(c, "Chart.yaml"))
	}
	if files["Chart.yaml"] != nil {
		l.Style = StyleHelm
		return l, nil
	}
	if l.HasKustomize {
		l.Style = StyleKustomize
	}
	return l, nil
}

func hasKustomization(files Files, dir string) bool {
	for _, k := range kustomizationFiles {
		if files[join(dir, k)] != nil {
			return true
		}
	}
	return false
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// isManifestFile tells whether a file may hold Kubernetes objects.
func isManifestFile(name string) bool {
	switch path.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

var patchFile = regexp.MustCompile(`^(.*)_patch\.(yaml|yml|json)$`)

// PlainManifests returns the manifest files of a plain bundle, with the
// selected overlays applied, by name. Files of chart or kustomize directories
// and of overlays/ are left out; files of an overlay replace the base file
// of the same name, and NAME_patch.yaml patches NAME.yaml (patchDocuments).
func PlainManifests(files Files, overlays []string) (Files, error) {
	skip := excludedDirs(files)
	base := Files{}
	for name, data := range files {
		if !isManifestFile(name) || strings.HasPrefix(name, "overlays/") || inDirs(name, skip) {
			continue
		}
		base[name] = data
	}
	for _, o := range overlays {
		prefix := "overlays/" + cleanPath(o) + "/"
		found := false
		for _, name := range sortedNames(files) {
			rel, ok := strings.CutPrefix(name, prefix)
			if !ok {
				continue
			}
			found = true
			m := patchFile.FindStringSubmatch(rel)
			if m == nil {
				if isManifestFile(rel) {
					base[rel] = files[name]
				}
				continue
			}
			target := ""
			for _, ext := range []string{".yaml", ".yml", ".json"} {
				if base[m[1]+ext] != nil {
					target = m[1] + ext
					break
				}
			}
			if target == "" {
				return nil, fmt.Errorf("overlay %s: %s patches %s.yaml, which the bundle does not have", o, rel, m[1])
			}
			patched, err := patchDocuments(base[target], files[name])
			if err != nil {
				return nil, fmt.Errorf("overlay %s: %s: %w", o, rel, err)
			}
			base[target] = patched
		}
		if !found {
			return nil, fmt.Errorf("yaml.overlays: the bundle has no overlays/%s/", o)
		}
	}
	return base, nil
}

// excludedDirs are the directories holding charts or kustomizations, and
// those holding a fleet.yaml below the bundle's root, which are bundles of
// their own whose files ride along in their parent, as Fleet ships them:
// their files are not plain manifests (Fleet's agent leaves out the
// directories of a Chart.yaml or a nested fleet.yaml alike).
func excludedDirs(files Files) []string {
	var dirs []string
	for name := range files {
		base, dir := path.Base(name), path.Dir(name)
		switch {
		case base == "Chart.yaml" || base == "kustomization.yaml" || base == "kustomization.yml" || base == "Kustomization":
			dirs = append(dirs, dir)
		case (base == "fleet.yaml" || base == "fleet.yml") && dir != ".":
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

func inDirs(name string, dirs []string) bool {
	for _, d := range dirs {
		if d == "." || strings.HasPrefix(name, d+"/") {
			return true
		}
	}
	return false
}

func sortedNames(f Files) []string {
	names := make([]string, 0, len(f))
	for n := range f {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// patchDocuments patches the documents of a YAML stream with an overlay's
// NAME_patch file, the way Fleet chooses the patch for a document:
//   - a patch that is a list is a JSON patch (RFC 6902), for a file of one
//     document;
//   - otherwise it patches each document whose kind and metadata.name, where
//     the patch sets them, match: strategically for the built-in kinds (lists
//     such as containers merge by their keys), as a JSON merge patch (RFC
//     7386) for the others.
func patchDocuments(data, patchData []byte) ([]byte, error) {
	var patch interface{}
	if err := yaml.Unmarshal(patchData, &patch); err != nil {
		return nil, err
	}
	docs, err := DecodeDocuments(data)
	if err != nil {
		return nil, err
	}
	switch p := patch.(type) {
	case nil:
		return data, nil // an empty patch, or comments only: nothing to do
	case []interface{}:
		if len(docs) != 1 {
			return nil, fmt.Errorf("a JSON patch (a list of operations) patches a file of one document, and this one has %d", len(docs))
		}
		if docs[0], err = jsonPatch(docs[0], p); err != nil {
			return nil, err
		}
	case map[string]interface{}:
		for i, doc := range docs {
			if !matchesPatch(doc, p) {
				continue
			}
			if docs[i], err = mergeDocument(doc, p); err != nil {
				return nil, err
			}
		}
	default:
		return nil, errors.New("a patch is a map of fields to merge, or a list of JSON patch operations")
	}
	var out bytes.Buffer
	for i, doc := range docs {
		b, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}

// jsonPatch applies the JSON patch ops to doc.
func jsonPatch(doc map[string]interface{}, ops []interface{}) (map[string]interface{}, error) {
	opsJSON, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	decoded, err := jsonpatch.DecodePatch(opsJSON)
	if err != nil {
		return nil, fmt.Errorf("not a JSON patch: %w", err)
	}
	docJSON, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	patched, err := decoded.Apply(docJSON)
	if err != nil {
		return nil, fmt.Errorf("applying the JSON patch: %w", err)
	}
	out := map[string]interface{}{}
	err = json.Unmarshal(patched, &out)
	return out, err
}

// mergeDocument merges patch into doc: a strategic merge patch when doc is
// of a kind client-go knows (but CustomResourceDefinitions, whose schema
// says nothing of how their lists merge), a JSON merge patch otherwise.
func mergeDocument(doc, patch map[string]interface{}) (map[string]interface{}, error) {
	apiVersion, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	typed, err := clientgoscheme.Scheme.New(schema.FromAPIVersionAndKind(apiVersion, kind))
	if err != nil || kind == "CustomResourceDefinition" {
		// A kind client-go does not know (New's error) takes a JSON merge patch.
		return MergePatch(doc, patch).(map[string]interface{}), nil //nolint:nilerr // the error only says the kind is not client-go's
	}
	docJSON, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	patchJSON, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergePatch(docJSON, patchJSON, typed)
	if err != nil {
		return nil, fmt.Errorf("merging into %s %s: %w", kind, apiVersion, err)
	}
	out := map[string]interface{}{}
	err = json.Unmarshal(patched, &out)
	return out, err
}

func matchesPatch(doc, patch map[string]interface{}) bool {
	if k, ok := patch["kind"].(string); ok && k != doc["kind"] {
		return false
	}
	pm, _ := patch["metadata"].(map[string]interface{})
	dm, _ := doc["metadata"].(map[string]interface{})
	if n, ok := pm["name"].(string); ok && (dm == nil || n != dm["name"]) {
		return false
	}
	return true
}

// MergePatch applies a JSON merge patch (RFC 7386) to a decoded document.
func MergePatch(doc, patch interface{}) interface{} {
	pm, ok := patch.(map[string]interface{})
	if !ok {
		return patch
	}
	dm, ok := doc.(map[string]interface{})
	if !ok {
		dm = map[string]interface{}{}
	}
	for k, v := range pm {
		if v == nil {
			delete(dm, k)
			continue
		}
		dm[k] = MergePatch(dm[k], v)
	}
	return dm
}

// DecodeDocuments splits a YAML or JSON stream into its non-empty documents.
func DecodeDocuments(data []byte) ([]map[string]interface{}, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []map[string]interface{}
	for {
		var doc map[string]interface{}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(doc) > 0 {
			out = append(out, doc)
		}
	}
}

// isObject tells whether a decoded document is a Kubernetes object rather
// than some other YAML file riding along in the bundle.
func isObject(doc map[string]interface{}) bool {
	av, _ := doc["apiVersion"].(string)
	k, _ := doc["kind"].(string)
	return av != "" && k != ""
}
