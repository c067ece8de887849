package target

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// CompiledMapping is a BundleNamespaceMapping with its selectors parsed once.
type CompiledMapping struct {
	// Name is the mapping's name.
	Name string
	// Namespace is the mapping's namespace; it only maps Bundles there.
	Namespace string

	bundleSelector    labels.Selector
	namespaceSelector labels.Selector
}

// CompileMapping parses the selectors of m. An unset selector selects nothing
// and {} selects everything.
func CompileMapping(m *fleet.BundleNamespaceMapping) (*CompiledMapping, error) {
	bs, err := metav1.LabelSelectorAsSelector(m.BundleSelector)
	if err != nil {
		return nil, fmt.Errorf("bundlenamespacemapping %s/%s: bundleSelector: %w", m.Namespace, m.Name, err)
	}
	ns, err := metav1.LabelSelectorAsSelector(m.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("bundlenamespacemapping %s/%s: namespaceSelector: %w", m.Namespace, m.Name, err)
	}
	return &CompiledMapping{Name: m.Name, Namespace: m.Namespace, bundleSelector: bs, namespaceSelector: ns}, nil
}

// MatchesBundle reports whether the mapping applies to a Bundle in
// bundleNamespace with bundleLabels: same namespace, and bundleSelector
// selects it.
func (m *CompiledMapping) MatchesBundle(bundleNamespace string, bundleLabels map[string]string) bool {
	return m.Namespace == bundleNamespace && m.bundleSelector.Matches(labels.Set(bundleLabels))
}

// MatchesNamespace reports whether namespaceSelector selects a namespace with
// these labels.
func (m *CompiledMapping) MatchesNamespace(nsLabels map[string]string) bool {
	return m.namespaceSelector.Matches(labels.Set(nsLabels))
}

// AllowedNamespaces returns, sorted, the namespaces whose Clusters a Bundle in
// bundleNamespace with bundleLabels may target: its own namespace always, plus
// every namespace of namespaces (name to labels) selected by a mapping that
// applies to the bundle. The namespaces are only scanned when some mapping
// applies, so bundles without mappings cost O(len(mappings)).
func AllowedNamespaces(mappings []*CompiledMapping, bundleNamespace string, bundleLabels map[string]string, namespaces map[string]map[string]string) []string {
	var applying []*CompiledMapping
	for _, m := range mappings {
		if m.MatchesBundle(bundleNamespace, bundleLabels) {
			applying = append(applying, m)
		}
	}
	out := []string{bundleNamespace}
	if len(applying) == 0 {
		return out
	}
	for ns, nsLabels := range namespaces {
		if ns == bundleNamespace {
			continue
		}
		for _, m := range applying {
			if m.MatchesNamespace(nsLabels) {
				out = append(out, ns)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}
