// Package crd embeds the CustomResourceDefinitions that controller-gen generates
// from api/v1alpha1, so that the CLI (`fleet install controller`), the local
// control planes of tests and the demo install exactly the same schema.
package crd

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var bases embed.FS

// Manifests returns the CRD documents as YAML, sorted by file name.
func Manifests() ([][]byte, error) {
	return readAll(bases, "bases")
}

// CRDs returns the decoded CustomResourceDefinitions.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	docs, err := Manifests()
	if err != nil {
		return nil, err
	}
	return Decode(docs)
}

// Decode parses CRD YAML documents.
func Decode(docs [][]byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(docs))
	for _, d := range docs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(d, crd); err != nil {
			return nil, fmt.Errorf("decoding CRD: %w", err)
		}
		out = append(out, crd)
	}
	return out, nil
}

func readAll(fsys fs.FS, dir string) ([][]byte, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	out := make([][]byte, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(fsys, dir+"/"+n)
		if err != nil {
			return nil, err
		}
		out = append(out, bytes.TrimSpace(b))
	}
	return out, nil
}
