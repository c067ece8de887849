package target

import (
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// maxCachedTargets is the largest number of targets for which AllMatches
// results are cached by the set of matching targets (a bit mask).
const maxCachedTargets = 64

// CompiledBundle is a Bundle's targeting, compiled once per Bundle version and
// safe for concurrent use.
type CompiledBundle struct {
	// Name is the Bundle's name.
	Name string
	// Namespace is the Bundle's namespace.
	Namespace string
	// UID is the UID of the Bundle compiled.
	UID types.UID
	// Generation is the generation of the Bundle compiled. Targeting depends
	// on the spec only, so a new generation is the only reason to recompile.
	Generation int64
	// ResourceVersion is the resourceVersion of the Bundle compiled; used by
	// UpToDate for objects that have no generation (not from an API server).
	ResourceVersion string

	mode         fleet.TargetCustomizationMode
	base         fleet.BundleDeploymentOptions
	targets      []compiledTarget
	restrictions []criteria

	// cache holds AllMatches results by the mask of matching targets; the
	// number of distinct masks is bounded by the combinations clusters really
	// have, in practice a handful.
	mu    sync.RWMutex
	cache map[uint64]*Result
}

type compiledTarget struct {
	name        string
	doNotDeploy bool
	criteria    criteria
	options     fleet.BundleDeploymentOptions
	// result is the Result when this target is the only one merged.
	result *Result
}

// criteria are the cluster-selecting fields of a target, restriction (or
// partition), with selectors parsed. A nil selector is an unset criterion.
type criteria struct {
	clusterName          string
	clusterGroup         string
	clusterSelector      labels.Selector
	clusterGroupSelector labels.Selector
}

// Result is how a cluster is targeted. Results are shared between clusters and
// calls: treat them as read-only and DeepCopy Options before changing them.
type Result struct {
	// Target is the name of the first matching target, the one that decided
	// the cluster is targeted.
	Target string
	// Targets are the names of the targets whose options were merged, in
	// order: just Target in FirstMatch mode, every matching target that is
	// not doNotDeploy in AllMatches mode.
	Targets []string
	// Options are the effective options: the bundle's options with the
	// targets' options merged over them (see Merge).
	Options fleet.BundleDeploymentOptions
}

// Compile parses every selector of b's targets and targetRestrictions and
// merges the options of each target over the bundle's. It fails on an invalid
// selector, naming the target, or on an unknown targetCustomizationMode. b is
// not kept: the CompiledBundle shares no memory with it.
func Compile(b *fleet.Bundle) (*CompiledBundle, error) {
	mode := b.Spec.TargetCustomizationMode
	switch mode {
	case "", fleet.FirstMatch:
		mode = fleet.FirstMatch
	case fleet.AllMatches:
	default:
		return nil, fmt.Errorf("targetCustomizationMode %q: must be %s or %s", mode, fleet.FirstMatch, fleet.AllMatches)
	}
	cb := &CompiledBundle{
		Name:            b.Name,
		Namespace:       b.Namespace,
		UID:             b.UID,
		Generation:      b.Generation,
		ResourceVersion: b.ResourceVersion,
		mode:            mode,
		base:            *b.Spec.BundleDeploymentOptions.DeepCopy(),
		targets:         make([]compiledTarget, 0, len(b.Spec.Targets)),
	}
	for i := range b.Spec.Targets {
		t := &b.Spec.Targets[i]
		c, err := compileCriteria(t.ClusterName, t.ClusterGroup, t.ClusterSelector, t.ClusterGroupSelector)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", describe("target", t.Name, i), err)
		}
		ct := compiledTarget{name: t.Name, doNotDeploy: t.DoNotDeploy, criteria: c}
		if !t.DoNotDeploy {
			ct.options = *t.BundleDeploymentOptions.DeepCopy()
			ct.result = &Result{Target: t.Name, Targets: []string{t.Name}, Options: Merge(cb.base, ct.options)}
		}
		cb.targets = append(cb.targets, ct)
	}
	for i := range b.Spec.TargetRestrictions {
		r := &b.Spec.TargetRestrictions[i]
		c, err := compileCriteria(r.ClusterName, r.ClusterGroup, r.ClusterSelector, r.ClusterGroupSelector)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", describe("targetRestriction", r.Name, i), err)
		}
		cb.restrictions = append(cb.restrictions, c)
	}
	if mode == fleet.AllMatches && len(cb.targets) <= maxCachedTargets {
		cb.cache = map[uint64]*Result{}
	}
	return cb, nil
}

// UpToDate reports whether cb was compiled from this version of b: same UID
// and generation (and resourceVersion when there is no generation).
func (cb *CompiledBundle) UpToDate(b *fleet.Bundle) bool {
	if b.UID != cb.UID || b.Generation != cb.Generation {
		return false
	}
	return b.Generation != 0 || b.ResourceVersion == cb.ResourceVersion
}

// Match decides whether the bundle goes to cluster c and with which options.
// It returns false when no target matches, when the first matching target is
// doNotDeploy, or when the bundle has targetRestrictions and none matches.
//
// A target (or restriction) matches when every criterion it sets matches:
// clusterName equals c.Name; clusterSelector selects c.Labels; clusterGroup
// and clusterGroupSelector hold for one and the same group of c.Groups (its
// name, its labels). A target that sets no criterion matches nothing. Targets
// are tried in spec order and the first match decides; in AllMatches mode the
// later matching targets merge their options too, and any matching target
// that is doNotDeploy leaves the cluster out, as in Fleet.
//
// Match does not check c's namespace: callers only ask about clusters in the
// namespaces AllowedNamespaces returns. The Result is shared: do not modify.
func (cb *CompiledBundle) Match(c *ClusterInfo) (*Result, bool) {
	if len(cb.restrictions) > 0 && !anyMatches(cb.restrictions, c) {
		return nil, false
	}
	first := -1
	for i := range cb.targets {
		if cb.targets[i].criteria.matches(c) {
			first = i
			break
		}
	}
	if first < 0 || cb.targets[first].doNotDeploy {
		return nil, false
	}
	if cb.mode != fleet.AllMatches {
		return cb.targets[first].result, true
	}
	for i := first + 1; i < len(cb.targets); i++ {
		if cb.targets[i].doNotDeploy && cb.targets[i].criteria.matches(c) {
			return nil, false
		}
	}
	return cb.matchAll(c, first), true
}

// matchAll merges the options of every matching target from first on.
func (cb *CompiledBundle) matchAll(c *ClusterInfo, first int) *Result {
	if cb.cache == nil { // too many targets for a mask: merge every time
		var matched []int
		for i := first; i < len(cb.targets); i++ {
			if i == first || cb.targets[i].matchesForOptions(c) {
				matched = append(matched, i)
			}
		}
		if len(matched) == 1 {
			return cb.targets[first].result
		}
		return cb.merge(matched)
	}
	mask := uint64(1) << first
	for i := first + 1; i < len(cb.targets); i++ {
		if cb.targets[i].matchesForOptions(c) {
			mask |= uint64(1) << i
		}
	}
	if mask == uint64(1)<<first {
		return cb.targets[first].result
	}
	cb.mu.RLock()
	r, ok := cb.cache[mask]
	cb.mu.RUnlock()
	if ok {
		return r
	}
	var matched []int
	for i := range cb.targets {
		if mask&(uint64(1)<<i) != 0 {
			matched = append(matched, i)
		}
	}
	r = cb.merge(matched)
	cb.mu.Lock()
	if prev, ok := cb.cache[mask]; ok {
		r = prev // another goroutine won; keep one shared Result
	} else {
		cb.cache[mask] = r
	}
	cb.mu.Unlock()
	return r
}

// merge builds the Result of the targets at indexes matched, in order.
func (cb *CompiledBundle) merge(matched []int) *Result {
	r := &Result{Target: cb.targets[matched[0]].name, Options: cb.base}
	for _, i := range matched {
		r.Targets = append(r.Targets, cb.targets[i].name)
		r.Options = Merge(r.Options, cb.targets[i].options)
	}
	return r
}

func (t *compiledTarget) matchesForOptions(c *ClusterInfo) bool {
	return !t.doNotDeploy && t.criteria.matches(c)
}

func anyMatches(cs []criteria, c *ClusterInfo) bool {
	for i := range cs {
		if cs[i].matches(c) {
			return true
		}
	}
	return false
}

func compileCriteria(clusterName, clusterGroup string, clusterSelector, clusterGroupSelector *metav1.LabelSelector) (criteria, error) {
	c := criteria{clusterName: clusterName, clusterGroup: clusterGroup}
	var err error
	if clusterSelector != nil {
		if c.clusterSelector, err = metav1.LabelSelectorAsSelector(clusterSelector); err != nil {
			return c, fmt.Errorf("clusterSelector: %w", err)
		}
	}
	if clusterGroupSelector != nil {
		if c.clusterGroupSelector, err = metav1.LabelSelectorAsSelector(clusterGroupSelector); err != nil {
			return c, fmt.Errorf("clusterGroupSelector: %w", err)
		}
	}
	return c, nil
}

// matches is Fleet's criteria match. The group criteria must hold for one
// group, as Fleet matches per group.
func (cr *criteria) matches(c *ClusterInfo) bool {
	if cr.clusterName == "" && cr.clusterGroup == "" && cr.clusterSelector == nil && cr.clusterGroupSelector == nil {
		return false
	}
	if cr.clusterName != "" && cr.clusterName != c.Name {
		return false
	}
	if cr.clusterSelector != nil && !cr.clusterSelector.Matches(labels.Set(c.Labels)) {
		return false
	}
	if cr.clusterGroup == "" && cr.clusterGroupSelector == nil {
		return true
	}
	for i := range c.Groups {
		g := &c.Groups[i]
		if cr.clusterGroup != "" && g.Name != cr.clusterGroup {
			continue
		}
		if cr.clusterGroupSelector != nil && !cr.clusterGroupSelector.Matches(labels.Set(g.Labels)) {
			continue
		}
		return true
	}
	return false
}

// describe names the i-th target or restriction in errors.
func describe(kind, name string, i int) string {
	if name == "" {
		return fmt.Sprintf("%s #%d", kind, i)
	}
	return fmt.Sprintf("%s %q", kind, name)
}
