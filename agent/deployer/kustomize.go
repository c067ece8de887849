package deployer

import (
	"fmt"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// helmOutputFile holds a chart's rendered output when a kustomization
// post-renders it.
const helmOutputFile = "fleet-helm-output.yaml"

// Kustomize renders the kustomization in dir over the bundle's files, in
// memory. When helmOutput is not nil it is added to the kustomization's
// resources first, so the kustomization post-renders a chart.
func Kustomize(files Files, dir string, helmOutput []byte) ([]byte, error) {
	fs := filesys.MakeFsInMemory()
	for name, data := range files {
		if err := fs.WriteFile("/"+name, data); err != nil {
			return nil, err
		}
	}
	root := "/" + dir
	if helmOutput != nil {
		if err := fs.WriteFile(root+"/"+helmOutputFile, helmOutput); err != nil {
			return nil, err
		}
		if err := addResource(fs, root, helmOutputFile); err != nil {
			return nil, err
		}
	}
	opts := krusty.MakeDefaultOptions()
	m, err := krusty.MakeKustomizer(opts).Run(fs, root)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", displayDir(dir), err)
	}
	return m.AsYaml()
}

// addResource appends a file to the resources of the kustomization in root.
func addResource(fs filesys.FileSystem, root, file string) error {
	for _, k := range kustomizationFiles {
		p := root + "/" + k
		if !fs.Exists(p) {
			continue
		}
		data, err := fs.ReadFile(p)
		if err != nil {
			return err
		}
		var kust map[string]interface{}
		if err := yaml.Unmarshal(data, &kust); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		if kust == nil {
			kust = map[string]interface{}{}
		}
		res, _ := kust["resources"].([]interface{})
		kust["resources"] = append(res, file)
		out, err := yaml.Marshal(kust)
		if err != nil {
			return err
		}
		return fs.WriteFile(p, out)
	}
	return fmt.Errorf("no kustomization in %s", root)
}
