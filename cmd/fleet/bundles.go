package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/bundlereader"
	"github.com/gitfleet/fleet/internal/scheme"
)

// readOptions say how directories become Bundles: the flags `fleet apply`,
// `fleet target` and `fleet test` share.
type readOptions struct {
	namespace string
	labels    map[string]string
	commit    string
	// drivenScan reads each PATH as "base[SEP options]", one bundle each, as
	// a GitRepo's spec.bundles.
	drivenScan    bool
	drivenScanSep string
	// targetsFile holds the targets and target restrictions of a GitRepo,
	// as Fleet's GitRepo job passes them.
	targetsFile string
	// gitRepo, when set, is the GitRepo whose bundles are read: its
	// targets and bundle options are given as the manager gives them
	// (fleet preview against the manager).
	gitRepo *fleet.GitRepo
}

// addFlags binds the options but the Bundles' labels: `fleet apply` binds
// them to --label (-l), while Fleet's `fleet target` and `fleet test` use -l
// for something else.
func (o *readOptions) addFlags(f *pflag.FlagSet) {
	f.StringVarP(&o.namespace, "namespace", "n", fleet.DefaultWorkspace, "namespace of the Bundles")
	f.StringVar(&o.commit, "commit", "", "commit the Bundles are built from, set as label "+fleet.CommitLabel)
	f.StringVar(&o.targetsFile, "targets-file", "", "YAML or JSON file with targets and targetRestrictions to add to every bundle, as a GitRepo's targets are (unless fleet.yaml has overrideTargets)")
	f.BoolVar(&o.drivenScan, "driven-scan", false, `read each PATH as one bundle, "DIR" or "DIR:OPTIONS", instead of searching it`)
	f.StringVar(&o.drivenScanSep, "driven-scan-sep", bundlereader.DefaultDrivenScanSeparator, "separator of DIR and OPTIONS in --driven-scan PATHs")
}

// read reads the bundles of paths as a GitRepo's paths are read; warnings
// about fleet.yaml files (fields ignored, as Fleet ignores them) go to
// errOut, one "warning: " line each.
func (o *readOptions) read(ctx context.Context, errOut io.Writer, name string, paths []string) ([]*fleet.Bundle, error) {
	ro := bundlereader.Options{
		Name:      name,
		Namespace: o.namespace,
		Labels:    o.labels,
		Commit:    o.commit,
		Warn: func(w bundlereader.Warning) {
			fmt.Fprintf(errOut, "warning: %s\n", w)
		},
	}
	if g := o.gitRepo; g != nil {
		// As the manager's GitRepo reconciler reads it (its readOptions).
		ro.TargetsFromRepo = bundlereader.RepoTargets(g.Spec.Targets)
		ro.TargetNamespace = g.Spec.TargetNamespace
		ro.ServiceAccount = g.Spec.ServiceAccount
		ro.KeepResources = g.Spec.KeepResources
		ro.DeleteNamespace = g.Spec.DeleteNamespace
		ro.CorrectDrift = g.Spec.CorrectDrift
		ro.ForceSyncGeneration = g.Spec.ForceSyncGeneration
	}
	var err error
	if o.targetsFile != "" {
		if ro.TargetsFile, err = bundlereader.ReadTargetsFile(o.targetsFile); err != nil {
			return nil, err
		}
	}
	// Reading may fetch Helm charts and take a while: say so on stderr, which
	// leaves standard output to the bundles (-o -) or the results.
	start := time.Now()
	fmt.Fprintf(errOut, "==> Reading bundles from %s\n", strings.Join(orDot(paths), ", "))
	var bundles []*fleet.Bundle
	if o.drivenScan {
		if len(paths) == 0 {
			paths = []string{"."}
		}
		var descs []fleet.BundlePath
		for _, p := range paths {
			d, err := bundlereader.ParseBundlePath(p, o.drivenScanSep)
			if err != nil {
				return nil, err
			}
			if d.Base, err = relativePath(d.Base); err != nil {
				return nil, err
			}
			descs = append(descs, d)
		}
		bundles, err = bundlereader.ReadDriven(ctx, ".", descs, ro)
	} else {
		if paths, err = relativePaths(paths); err != nil {
			return nil, err
		}
		bundles, err = bundlereader.Read(ctx, ".", paths, ro)
	}
	if err != nil {
		return nil, err
	}
	if len(bundles) == 0 {
		return nil, fmt.Errorf("no bundle found in %s: add a fleet.yaml or manifests", strings.Join(paths, ", "))
	}
	fmt.Fprintf(errOut, "==> Read %d %s in %s\n", len(bundles), plural(len(bundles), "bundle"), time.Since(start).Round(time.Millisecond))
	return bundles, nil
}

// relativePaths makes absolute paths below the current directory relative
// to it, since bundles are read, and named, relative to it.
func relativePaths(paths []string) ([]string, error) {
	if len(paths) == 0 {
		return []string{"."}, nil
	}
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		rel, err := relativePath(p)
		if err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	return out, nil
}

// relativePath makes an absolute path below the current directory relative
// to it. Other paths are left as they are: a leading "/" of a path that is
// not below the current directory means the current directory, as in Fleet.
func relativePath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	// A path Rel cannot relate to wd (err != nil) is not below it either:
	// it is left as it is.
	if rel, err := filepath.Rel(wd, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return rel, nil
	}
	return p, nil
}

// objects lists typed objects for writeObjects.
func objects[T runtime.Object](objs []T) []runtime.Object {
	out := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		out = append(out, o)
	}
	return out
}

// writeObjects writes objects as a YAML stream, "---" before each: what
// `fleet apply -o`, `fleet target` and `fleet test` print. Typed objects are
// written without their status and their unset creationTimestamp, which
// they marshal though nothing set them; the apiVersion and kind of a typed
// object come from the CLI's scheme when it does not carry them.
func writeObjects(w io.Writer, objs ...runtime.Object) error {
	s := scheme.New()
	for _, o := range objs {
		data, err := json.Marshal(o)
		if err != nil {
			return err
		}
		var m map[string]interface{}
		if err := json.Unmarshal(data, &m); err != nil {
			return err
		}
		if _, unstructured := o.(runtime.Unstructured); !unstructured {
			delete(m, "status")
			if md, ok := m["metadata"].(map[string]interface{}); ok && md["creationTimestamp"] == nil {
				delete(md, "creationTimestamp")
			}
			if m["kind"] == nil {
				if gvks, _, err := s.ObjectKinds(o); err == nil && len(gvks) > 0 {
					m["apiVersion"], m["kind"] = gvks[0].GroupVersion().String(), gvks[0].Kind
				}
			}
		}
		doc, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "---\n%s", doc); err != nil {
			return err
		}
	}
	return nil
}
