package deployer

import (
	"bytes"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Scope tells whether objects of a kind are namespaced; known is false when
// the cluster does not serve the kind (yet).
type Scope func(gvk schema.GroupVersionKind) (namespaced, known bool)

// Target is where a release's objects go.
type Target struct {
	// ReleaseName and ReleaseNamespace identify the release.
	ReleaseName, ReleaseNamespace string
	// ForceNamespace, when set (options.namespace), puts every object in it;
	// cluster-scoped objects are then an error.
	ForceNamespace string
	// KeepCRDs marks every CustomResourceDefinition for Helm to keep when
	// the release is uninstalled or the CRD leaves the bundle (see KeepCRD).
	KeepCRDs bool
}

// KeepCRD marks o, if it is a CustomResourceDefinition, with Helm's
// resource policy "keep", as Fleet does unless deleteCRDResources: Helm then
// neither deletes it on uninstall nor when an upgrade drops it. Deleting a
// CRD deletes every custom resource of its kind, users' own included, so a
// removed bundle must not take them along. (CRDs in a chart's crds/
// directory are never deleted by Helm anyway.)
func KeepCRD(o *unstructured.Unstructured) {
	if !isCRD(o) {
		return
	}
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[release.ResourcePolicyAnnotation] = release.KeepPolicy
	o.SetAnnotations(ann)
}

func isCRD(o *unstructured.Unstructured) bool {
	return o.GetKind() == "CustomResourceDefinition" && o.GroupVersionKind().Group == "apiextensions.k8s.io"
}

// Transform labels each object with its release, marks CRDs to be kept
// (KeepCRDs) and sets its namespace:
// ForceNamespace for every namespaced object, else the release namespace
// for namespaced objects that have none.
func Transform(objs []*unstructured.Unstructured, t Target, scope Scope) error {
	for _, o := range objs {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[fleet.ReleaseNameLabel] = t.ReleaseName
		labels[fleet.ReleaseNamespaceLabel] = t.ReleaseNamespace
		o.SetLabels(labels)
		if t.KeepCRDs {
			KeepCRD(o)
		}

		if t.ForceNamespace != "" {
			if err := forceNamespace(o, t.ForceNamespace, scope); err != nil {
				return err
			}
			continue
		}
		if namespaced, known := scope(o.GroupVersionKind()); known && namespaced && o.GetNamespace() == "" {
			o.SetNamespace(t.ReleaseNamespace)
		}
	}
	return nil
}

// forceNamespace puts o into namespace ns; a cluster-scoped o is an error.
// A kind the cluster does not serve yet is taken as namespaced.
func forceNamespace(o *unstructured.Unstructured, ns string, scope Scope) error {
	if namespaced, known := scope(o.GroupVersionKind()); known && !namespaced {
		return fmt.Errorf("%s %s is cluster-scoped, but the bundle's namespace option %q forces every object into one namespace",
			o.GetKind(), o.GetName(), ns)
	}
	o.SetNamespace(ns)
	return nil
}

// postRenderer runs, on Helm's rendered manifests, the bundle's
// kustomization (if it post-renders a chart) and then Transform.
type postRenderer struct {
	files     Files
	layout    Layout
	kustomize bool
	target    Target
	scope     Scope
}

// Run implements Helm's postrender.PostRenderer.
func (p *postRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	data := in.Bytes()
	if p.kustomize {
		var err error
		if data, err = Kustomize(p.files, p.layout.KustomizeDir, data); err != nil {
			return nil, err
		}
	}
	out, err := TransformManifests(data, p.target, p.scope)
	if err != nil {
		return nil, err
	}
	return bytes.NewBuffer(out), nil
}

// TransformManifests applies Transform to a YAML stream.
func TransformManifests(data []byte, t Target, scope Scope) ([]byte, error) {
	objs, err := decodeObjects(data)
	if err != nil {
		return nil, err
	}
	if err := Transform(objs, t, scope); err != nil {
		return nil, err
	}
	return encodeObjects(objs)
}

// ForceNamespaceManifests puts every object of a YAML stream into namespace
// ns, as Transform does with ForceNamespace, and changes nothing else.
func ForceNamespaceManifests(data []byte, ns string, scope Scope) ([]byte, error) {
	objs, err := decodeObjects(data)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if err := forceNamespace(o, ns, scope); err != nil {
			return nil, err
		}
	}
	return encodeObjects(objs)
}

func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	docs, err := DecodeDocuments(data)
	if err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, 0, len(docs))
	for _, d := range docs {
		u := &unstructured.Unstructured{Object: d}
		if u.GetKind() == "List" {
			list, err := u.ToList()
			if err != nil {
				return nil, err
			}
			for i := range list.Items {
				objs = append(objs, &list.Items[i])
			}
			continue
		}
		objs = append(objs, u)
	}
	return objs, nil
}

func encodeObjects(objs []*unstructured.Unstructured) ([]byte, error) {
	var out bytes.Buffer
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.Bytes(), nil
}
