package dashboard

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
)

// Snapshot is what one user may see, read from the cache for one request.
type Snapshot struct {
	GitRepos    []fleet.GitRepo
	HelmOps     []fleet.HelmOp
	Bundles     []fleet.Bundle
	Deployments []fleet.BundleDeployment
	Clusters    []fleet.Cluster
	Groups      []fleet.ClusterGroup
	Tokens      []fleet.ClusterRegistrationToken
	// Hidden names the kinds the user may not list anywhere, or that could
	// not be read: the page says so rather than showing them empty.
	Hidden []string
}

// Workspaces are the namespaces of the GitRepos, HelmOps, Bundles and
// Clusters the snapshot holds, sorted.
func (s *Snapshot) Workspaces() []string {
	set := map[string]bool{}
	for i := range s.GitRepos {
		set[s.GitRepos[i].Namespace] = true
	}
	for i := range s.HelmOps {
		set[s.HelmOps[i].Namespace] = true
	}
	for i := range s.Bundles {
		set[s.Bundles[i].Namespace] = true
	}
	for i := range s.Clusters {
		set[s.Clusters[i].Namespace] = true
	}
	out := make([]string, 0, len(set))
	for ws := range set {
		out = append(out, ws)
	}
	sort.Strings(out)
	return out
}

// Cell is one deployment of a bundle to a cluster, as the matrix shows it.
type Cell struct {
	State   fleet.BundleState
	Message string
}

// Class is the CSS class of a state.
func Class(state fleet.BundleState) string {
	switch state {
	case fleet.Ready:
		return "ok"
	case fleet.ErrApplied, fleet.NotReady:
		return "err"
	case fleet.Modified, fleet.OutOfSync:
		return "warn"
	case "":
		return "none"
	}
	return "wait"
}

// key names a bundle or a cluster by namespace and name.
type key struct{ Namespace, Name string }

func (k key) String() string { return k.Namespace + "/" + k.Name }

// cells indexes the deployments by bundle, then cluster.
func (s *Snapshot) cells() map[key]map[key]*fleet.BundleDeployment {
	out := map[key]map[key]*fleet.BundleDeployment{}
	for i := range s.Deployments {
		bd := &s.Deployments[i]
		b := key{bd.Labels[fleet.BundleNamespaceLabel], bd.Labels[fleet.BundleNameLabel]}
		c := key{bd.Labels[fleet.ClusterNamespaceLabel], bd.Labels[fleet.ClusterLabel]}
		if b.Name == "" || c.Name == "" {
			continue
		}
		if out[b] == nil {
			out[b] = map[key]*fleet.BundleDeployment{}
		}
		out[b][c] = bd
	}
	return out
}

// States are the states a filter may name, best first.
var States = []fleet.BundleState{fleet.Ready, fleet.NotReady, fleet.Pending, fleet.OutOfSync, fleet.Modified,
	fleet.WaitApplied, fleet.ErrApplied}

// Filter is the matrix's and lists' query: every field comes from the URL.
type Filter struct {
	Workspace string
	// Label selects clusters by their labels.
	Label string
	// State keeps the clusters with at least one deployment in this state.
	State fleet.BundleState
	// Search keeps the clusters and bundles whose name contains it.
	Search string
	Page   int
}

// PageSize is the number of clusters one page of the matrix or the cluster
// list shows.
const PageSize = 50

// ParseFilter reads a filter from URL query values; a malformed one is an
// error naming the parameter.
func ParseFilter(get func(string) string) (Filter, labels.Selector, error) {
	f := Filter{Workspace: get("ws"), Label: get("label"), Search: strings.TrimSpace(get("q")), Page: 1}
	sel := labels.Everything()
	if f.Label != "" {
		var err error
		if sel, err = labels.Parse(f.Label); err != nil {
			return f, nil, fmt.Errorf("label %q is not a label selector (e.g. env=prod,region in (eu,us)): %v", f.Label, err)
		}
	}
	if st := get("state"); st != "" {
		if !slices.Contains(States, fleet.BundleState(st)) {
			return f, nil, fmt.Errorf("state %q is not one of %s", st, joinStates())
		}
		f.State = fleet.BundleState(st)
	}
	if p := get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return f, nil, fmt.Errorf("page %q is not a page number (1, 2, ...)", p)
		}
		f.Page = n
	}
	return f, sel, nil
}

func joinStates() string {
	s := make([]string, len(States))
	for i, st := range States {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// Matrix is one page of bundles by clusters.
type Matrix struct {
	Bundles []MatrixBundle
	Rows    []MatrixRow
	// Clusters counts the clusters the filter keeps, over every page.
	Clusters   int
	Page, Last int
	// Totals counts the filtered cells by state, over every page.
	Totals map[fleet.BundleState]int
}

// MatrixBundle is a column: a bundle and its counts over the kept clusters.
type MatrixBundle struct {
	Namespace, Name string
	Ready, Total    int
}

// MatrixRow is a cluster and its cells, one per column.
type MatrixRow struct {
	Namespace, Name, State string
	Cells                  []Cell
}

// BuildMatrix computes the page f asks for: clusters (rows) kept by the
// workspace, label, state and search, bundles (columns) of the workspace
// kept by the search when it names one, else every one but the agent
// Bundles.
func BuildMatrix(s *Snapshot, f Filter, sel labels.Selector) Matrix {
	cells := s.cells()
	var bundles []key
	for i := range s.Bundles {
		b := &s.Bundles[i]
		// Agent Bundles (one per cluster) are the clusters view's agent
		// version: as columns they would make the matrix as wide as the fleet.
		if (f.Workspace != "" && b.Namespace != f.Workspace) || isAgentBundle(b) {
			continue
		}
		bundles = append(bundles, key{b.Namespace, b.Name})
	}
	if f.Search != "" {
		var named []key
		for _, b := range bundles {
			if strings.Contains(b.Name, f.Search) {
				named = append(named, b)
			}
		}
		if len(named) > 0 {
			bundles = named
		}
	}
	sort.Slice(bundles, func(i, j int) bool { return bundles[i].String() < bundles[j].String() })
	m := Matrix{Totals: map[fleet.BundleState]int{}}
	for _, b := range bundles {
		m.Bundles = append(m.Bundles, MatrixBundle{Namespace: b.Namespace, Name: b.Name})
	}
	searchBundles := f.Search != "" && len(bundles) > 0 && anyNamed(bundles, f.Search)
	var rows []MatrixRow
	for i := range s.Clusters {
		c := &s.Clusters[i]
		if f.Workspace != "" && c.Namespace != f.Workspace {
			continue
		}
		if !sel.Matches(labels.Set(c.Labels)) {
			continue
		}
		if f.Search != "" && !searchBundles && !strings.Contains(c.Name, f.Search) {
			continue
		}
		ck := key{c.Namespace, c.Name}
		row := MatrixRow{Namespace: c.Namespace, Name: c.Name, State: c.Status.Display.State}
		keep := f.State == ""
		for _, b := range bundles {
			var cell Cell
			if bd := cells[b][ck]; bd != nil {
				cell = Cell{State: summary.State(bd), Message: summary.Message(bd)}
			}
			if cell.State == f.State && f.State != "" {
				keep = true
			}
			row.Cells = append(row.Cells, cell)
		}
		if !keep {
			continue
		}
		for j, cell := range row.Cells {
			if cell.State == "" {
				continue
			}
			m.Totals[cell.State]++
			m.Bundles[j].Total++
			if cell.State == fleet.Ready {
				m.Bundles[j].Ready++
			}
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Namespace != rows[j].Namespace {
			return rows[i].Namespace < rows[j].Namespace
		}
		return rows[i].Name < rows[j].Name
	})
	m.Clusters = len(rows)
	m.Page, m.Last = f.Page, max(1, (len(rows)+PageSize-1)/PageSize)
	from := min((f.Page-1)*PageSize, len(rows))
	m.Rows = rows[from:min(from+PageSize, len(rows))]
	return m
}

func anyNamed(bundles []key, search string) bool {
	for _, b := range bundles {
		if strings.Contains(b.Name, search) {
			return true
		}
	}
	return false
}

// Counts counts objects by state word.
type Counts struct {
	Kind   string
	Link   string
	Total  int
	States []StateCount
}

// StateCount is one state and how many objects are in it.
type StateCount struct {
	State string
	Class string
	N     int
}

func count(kind, link string, states []string) Counts {
	by := map[string]int{}
	for _, s := range states {
		by[s]++
	}
	c := Counts{Kind: kind, Link: link, Total: len(states)}
	for s, n := range by {
		c.States = append(c.States, StateCount{State: s, Class: Class(fleet.BundleState(s)), N: n})
	}
	sort.Slice(c.States, func(i, j int) bool { return c.States[i].State < c.States[j].State })
	return c
}

// readyState is an object's Ready condition as one word: Ready, the
// condition's reason when False, else Pending.
func readyState(conds []metav1.Condition) (string, string) {
	c := meta.FindStatusCondition(conds, fleet.ConditionReady)
	switch {
	case c == nil:
		return string(fleet.Pending), ""
	case c.Status == metav1.ConditionTrue:
		return string(fleet.Ready), ""
	case c.Reason != "":
		return c.Reason, c.Message
	}
	return string(fleet.NotReady), c.Message
}

// Attention is an object that needs a look, worst first.
type Attention struct {
	Kind, Namespace, Name, State, Message, Link string
}

// Overview counts objects by state and lists what needs attention first:
// failed deployments, sources that fail, clusters not ready.
type Overview struct {
	Counts    []Counts
	Attention []Attention
	// More counts what needs attention beyond the list.
	More int
}

// attentionMax bounds the overview's list.
const attentionMax = 20

// BuildOverview computes the overview.
func BuildOverview(s *Snapshot) Overview {
	var o Overview
	st := make([]string, 0, len(s.GitRepos))
	var att []Attention
	for i := range s.GitRepos {
		g := &s.GitRepos[i]
		state, msg := readyState(g.Status.Conditions)
		st = append(st, state)
		if state != string(fleet.Ready) && msg != "" {
			att = append(att, Attention{"GitRepo", g.Namespace, g.Name, state, msg, "/gitrepos?ws=" + g.Namespace})
		}
	}
	o.Counts = append(o.Counts, count("GitRepos", "/gitrepos", st))
	st = make([]string, 0, len(s.HelmOps))
	for i := range s.HelmOps {
		h := &s.HelmOps[i]
		state, msg := readyState(h.Status.Conditions)
		st = append(st, state)
		if state != string(fleet.Ready) && msg != "" {
			att = append(att, Attention{"HelmOp", h.Namespace, h.Name, state, msg, "/gitrepos?ws=" + h.Namespace})
		}
	}
	o.Counts = append(o.Counts, count("HelmOps", "/gitrepos", st))
	st = make([]string, 0, len(s.Bundles))
	for i := range s.Bundles {
		b := &s.Bundles[i]
		state := b.Status.Display.State
		if state == "" {
			state, _ = readyState(b.Status.Conditions)
		}
		st = append(st, state)
	}
	o.Counts = append(o.Counts, count("Bundles", "/matrix", st))
	st = make([]string, 0, len(s.Clusters))
	for i := range s.Clusters {
		c := &s.Clusters[i]
		state := c.Status.Display.State
		if state == "" {
			state, _ = readyState(c.Status.Conditions)
		}
		st = append(st, state)
		if state != string(fleet.Ready) && state != "" {
			_, msg := readyState(c.Status.Conditions)
			att = append(att, Attention{"Cluster", c.Namespace, c.Name, state, msg, clusterLink(c.Namespace, c.Name)})
		}
	}
	o.Counts = append(o.Counts, count("Clusters", "/clusters", st))
	for i := range s.Deployments {
		bd := &s.Deployments[i]
		state := summary.State(bd)
		if state == fleet.Ready {
			continue
		}
		att = append(att, Attention{"Deployment", bd.Labels[fleet.ClusterNamespaceLabel],
			bd.Labels[fleet.BundleNameLabel] + " on " + bd.Labels[fleet.ClusterLabel], string(state), summary.Message(bd),
			bundleLink(bd.Labels[fleet.BundleNamespaceLabel], bd.Labels[fleet.BundleNameLabel])})
	}
	sort.SliceStable(att, func(i, j int) bool { return severity(att[i].State) > severity(att[j].State) })
	if len(att) > attentionMax {
		o.More = len(att) - attentionMax
		att = att[:attentionMax]
	}
	o.Attention = att
	return o
}

// severity orders the attention list: failures first, then not ready, then
// the rest.
func severity(state string) int {
	switch Class(fleet.BundleState(state)) {
	case "err":
		return 3
	case "warn":
		return 2
	case "wait":
		return 1
	}
	return 0
}

func bundleLink(ns, name string) string  { return "/bundles/" + ns + "/" + name }
func clusterLink(ns, name string) string { return "/clusters/" + ns + "/" + name }

// ago says how long ago t was, coarsely.
func ago(now time.Time, t metav1.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t.Time).Round(time.Second)
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
