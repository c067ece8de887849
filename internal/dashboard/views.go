package dashboard

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
)

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	snap := s.read(w, r)
	if snap == nil {
		return
	}
	s.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Section: "overview", Live: true, Hidden: snap.Hidden,
		Data: BuildOverview(snap)})
}

// SourceRow is a GitRepo or a HelmOp.
type SourceRow struct {
	Kind, Namespace, Name, Source, Revision, Fetched, State, Message, Clusters string
}

func (s *Server) gitrepos(w http.ResponseWriter, r *http.Request) {
	snap := s.read(w, r)
	if snap == nil {
		return
	}
	ws := r.URL.Query().Get("ws")
	if ws != "" && !slicesContains(snap.Workspaces(), ws) {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no workspace %q that you may see", ws))
		return
	}
	now := time.Now()
	var rows []SourceRow
	for i := range snap.GitRepos {
		g := &snap.GitRepos[i]
		if ws != "" && g.Namespace != ws {
			continue
		}
		state, msg := readyState(g.Status.Conditions)
		rows = append(rows, SourceRow{Kind: "GitRepo", Namespace: g.Namespace, Name: g.Name,
			Source: g.Spec.Repo + pathsOf(g.Spec.Paths), Revision: short(g.Status.Commit),
			Fetched: ago(now, g.Status.LastPollingTriggered), State: state, Message: msg,
			Clusters: fmt.Sprintf("%d/%d", g.Status.ReadyClusters, g.Status.DesiredReadyClusters)})
	}
	for i := range snap.HelmOps {
		h := &snap.HelmOps[i]
		if ws != "" && h.Namespace != ws {
			continue
		}
		state, msg := readyState(h.Status.Conditions)
		src := ""
		if h.Spec.Helm != nil {
			src = strings.TrimSpace(h.Spec.Helm.Repo + " " + h.Spec.Helm.Chart)
		}
		rows = append(rows, SourceRow{Kind: "HelmOp", Namespace: h.Namespace, Name: h.Name, Source: src,
			Revision: h.Status.Version, Fetched: ago(now, h.Status.LastPollingTime), State: state, Message: msg,
			Clusters: fmt.Sprintf("%d/%d", h.Status.ReadyClusters, h.Status.DesiredReadyClusters)})
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].Namespace+"/"+rows[i].Name < rows[j].Namespace+"/"+rows[j].Name
	})
	s.render(w, r, http.StatusOK, "gitrepos", page{Title: "GitRepos and HelmOps", Section: "gitrepos", Live: true,
		Hidden: snap.Hidden, Data: struct {
			Rows       []SourceRow
			Workspaces []string
			Workspace  string
		}{rows, snap.Workspaces(), ws}})
}

func pathsOf(p []string) string {
	if len(p) == 0 {
		return ""
	}
	return " (" + strings.Join(p, ", ") + ")"
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// filterPage reads the URL's filter; a malformed one or an unknown
// workspace is a 400 or 404 page.
func (s *Server) filterPage(w http.ResponseWriter, r *http.Request, snap *Snapshot) (Filter, labels.Selector, bool) {
	f, sel, err := ParseFilter(r.URL.Query().Get)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "Malformed filter: "+err.Error())
		return f, nil, false
	}
	if f.Workspace != "" && !slicesContains(snap.Workspaces(), f.Workspace) {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no workspace %q that you may see", f.Workspace))
		return f, nil, false
	}
	return f, sel, true
}

func (s *Server) matrix(w http.ResponseWriter, r *http.Request) {
	snap := s.read(w, r)
	if snap == nil {
		return
	}
	f, sel, ok := s.filterPage(w, r, snap)
	if !ok {
		return
	}
	m := BuildMatrix(snap, f, sel)
	if f.Page > m.Last {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no page %d: the matrix has %d", f.Page, m.Last))
		return
	}
	s.render(w, r, http.StatusOK, "matrix", page{Title: "Matrix", Section: "matrix", Live: true, Hidden: snap.Hidden,
		Data: struct {
			Matrix
			Filter     Filter
			Workspaces []string
			States     []fleet.BundleState
		}{m, f, snap.Workspaces(), States}})
}

// BundlePage is a bundle with its targets, rollout and deployments.
type BundlePage struct {
	Bundle     *fleet.Bundle
	State      string
	Message    string
	Targets    []TargetRow
	Partitions []fleet.PartitionStatus
	NotReady   []DeploymentRow
	Ready      int
	// Cut counts the not-ready deployments beyond the list.
	Cut int
}

// TargetRow is one target and its customization.
type TargetRow struct {
	Name, Cluster, Selector, Group, GroupSelector, Customization string
	DoNotDeploy                                                  bool
}

// DeploymentRow is a bundle on a cluster.
type DeploymentRow struct {
	ClusterNamespace, Cluster, BundleNamespace, Bundle string
	State                                              fleet.BundleState
	Message                                            string
	NonReady                                           []fleet.NonReadyStatus
	Modified                                           []fleet.ModifiedStatus
	Incomplete                                         bool
}

// notReadyMax bounds a bundle's list of not-ready clusters.
const notReadyMax = 200

func (s *Server) bundle(w http.ResponseWriter, r *http.Request) {
	snap := s.read(w, r)
	if snap == nil {
		return
	}
	ns, name := r.PathValue("ns"), r.PathValue("name")
	var b *fleet.Bundle
	for i := range snap.Bundles {
		if snap.Bundles[i].Namespace == ns && snap.Bundles[i].Name == name {
			b = &snap.Bundles[i]
		}
	}
	if b == nil {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no bundle %s/%s that you may see", ns, name))
		return
	}
	p := BundlePage{Bundle: b, Partitions: b.Status.Partitions}
	p.State, p.Message = readyState(b.Status.Conditions)
	if b.Status.Display.State != "" {
		p.State = b.Status.Display.State
	}
	for _, t := range b.Spec.Targets {
		row := TargetRow{Name: t.Name, Cluster: t.ClusterName, Group: t.ClusterGroup, DoNotDeploy: t.DoNotDeploy}
		if t.ClusterSelector != nil {
			row.Selector = metav1.FormatLabelSelector(t.ClusterSelector)
		}
		if t.ClusterGroupSelector != nil {
			row.GroupSelector = metav1.FormatLabelSelector(t.ClusterGroupSelector)
		}
		if opts, err := yaml.Marshal(t.BundleDeploymentOptions); err == nil && strings.TrimSpace(string(opts)) != "{}" {
			row.Customization = string(opts)
		}
		p.Targets = append(p.Targets, row)
	}
	for i := range snap.Deployments {
		bd := &snap.Deployments[i]
		if bd.Labels[fleet.BundleNamespaceLabel] != ns || bd.Labels[fleet.BundleNameLabel] != name {
			continue
		}
		if summary.State(bd) == fleet.Ready {
			p.Ready++
			continue
		}
		p.NotReady = append(p.NotReady, deploymentRow(bd))
	}
	sort.Slice(p.NotReady, func(i, j int) bool { return p.NotReady[i].Cluster < p.NotReady[j].Cluster })
	if len(p.NotReady) > notReadyMax {
		p.Cut = len(p.NotReady) - notReadyMax
		p.NotReady = p.NotReady[:notReadyMax]
	}
	s.render(w, r, http.StatusOK, "bundle", page{Title: "Bundle " + ns + "/" + name, Section: "matrix", Live: true,
		Hidden: snap.Hidden, Data: p})
}

func deploymentRow(bd *fleet.BundleDeployment) DeploymentRow {
	return DeploymentRow{
		ClusterNamespace: bd.Labels[fleet.ClusterNamespaceLabel], Cluster: bd.Labels[fleet.ClusterLabel],
		BundleNamespace: bd.Labels[fleet.BundleNamespaceLabel], Bundle: bd.Labels[fleet.BundleNameLabel],
		State: summary.State(bd), Message: summary.Message(bd),
		NonReady: bd.Status.NonReadyStatus, Modified: bd.Status.ModifiedStatus, Incomplete: bd.Status.IncompleteState,
	}
}

// ClusterRow is a cluster in the list.
type ClusterRow struct {
	Namespace, Name, State, LastSeen, AgentNamespace string
	Offline                                          bool
	// Agent is the version of the cluster's agent.
	Agent   AgentVersion
	Labels  []string
	Groups  []string
	Failing []string
	// MoreFailing counts the failing bundles beyond Failing.
	MoreFailing int
}

// groupsOf names the groups of the cluster's namespace whose selector
// selects it.
func groupsOf(snap *Snapshot, c *fleet.Cluster) []string {
	var out []string
	for i := range snap.Groups {
		g := &snap.Groups[i]
		if g.Namespace != c.Namespace || g.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(g.Spec.Selector)
		if err == nil && sel.Matches(labels.Set(c.Labels)) {
			out = append(out, g.Name)
		}
	}
	return out
}

func labelList(l map[string]string) []string {
	out := make([]string, 0, len(l))
	for k, v := range l {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func clusterRow(snap *Snapshot, c *fleet.Cluster, failing map[key][]string, agents map[key]AgentVersion, now time.Time) ClusterRow {
	row := ClusterRow{Namespace: c.Namespace, Name: c.Name, State: c.Status.Display.State, Agent: agents[key{c.Namespace, c.Name}],
		LastSeen: ago(now, c.Status.Agent.LastSeen), AgentNamespace: c.Status.Agent.Namespace,
		Offline: offline(c), Labels: labelList(c.Labels),
		Groups: groupsOf(snap, c)}
	if row.State == "" {
		row.State, _ = readyState(c.Status.Conditions)
	}
	f := failing[key{c.Namespace, c.Name}]
	if len(f) > 5 {
		row.MoreFailing = len(f) - 5
		f = f[:5]
	}
	row.Failing = f
	return row
}

// offline tells whether the manager marked the cluster Offline (its agent
// stopped checking in), in its display state or its Ready condition.
func offline(c *fleet.Cluster) bool {
	ready := meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionReady)
	return c.Status.Display.State == fleet.ClusterStateOffline || (ready != nil && ready.Reason == fleet.ClusterStateOffline)
}

// failingByCluster names the bundles not Ready on each cluster.
func failingByCluster(snap *Snapshot) map[key][]string {
	out := map[key][]string{}
	for i := range snap.Deployments {
		bd := &snap.Deployments[i]
		if summary.State(bd) == fleet.Ready {
			continue
		}
		k := key{bd.Labels[fleet.ClusterNamespaceLabel], bd.Labels[fleet.ClusterLabel]}
		out[k] = append(out[k], bd.Labels[fleet.BundleNameLabel])
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}

// clustersInState are the clusters with at least one deployment in state
// (the filter's meaning, as in the matrix); nil for no state.
func clustersInState(snap *Snapshot, state fleet.BundleState) map[key]bool {
	if state == "" {
		return nil
	}
	out := map[key]bool{}
	for i := range snap.Deployments {
		bd := &snap.Deployments[i]
		if summary.State(bd) == state {
			out[key{bd.Labels[fleet.ClusterNamespaceLabel], bd.Labels[fleet.ClusterLabel]}] = true
		}
	}
	return out
}

func (s *Server) clusters(w http.ResponseWriter, r *http.Request) {
	snap := s.read(w, r)
	if snap == nil {
		return
	}
	f, sel, ok := s.filterPage(w, r, snap)
	if !ok {
		return
	}
	failing := failingByCluster(snap)
	agents := agentVersions(snap, snap.cells())
	inState := clustersInState(snap, f.State)
	now := time.Now()
	var rows []ClusterRow
	for i := range snap.Clusters {
		c := &snap.Clusters[i]
		if (f.Workspace != "" && c.Namespace != f.Workspace) || !sel.Matches(labels.Set(c.Labels)) ||
			(f.Search != "" && !strings.Contains(c.Name, f.Search)) ||
			(f.State != "" && !inState[key{c.Namespace, c.Name}]) {
			continue
		}
		rows = append(rows, clusterRow(snap, c, failing, agents, now))
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].Namespace+"/"+rows[i].Name < rows[j].Namespace+"/"+rows[j].Name
	})
	last := max(1, (len(rows)+PageSize-1)/PageSize)
	if f.Page > last {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no page %d: the list has %d", f.Page, last))
		return
	}
	from := (f.Page - 1) * PageSize
	total := len(rows)
	rows = rows[from:min(from+PageSize, len(rows))]
	s.render(w, r, http.StatusOK, "clusters", page{Title: "Clusters", Section: "clusters", Live: true,
		Hidden: snap.Hidden, Data: struct {
			Rows              []ClusterRow
			Total, Page, Last int
			Filter            Filter
			Workspaces        []string
			States            []fleet.BundleState
		}{rows, total, f.Page, last, f, snap.Workspaces(), States}})
}

func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	snap := s.read(w, r)
	if snap == nil {
		return
	}
	ns, name := r.PathValue("ns"), r.PathValue("name")
	var c *fleet.Cluster
	for i := range snap.Clusters {
		if snap.Clusters[i].Namespace == ns && snap.Clusters[i].Name == name {
			c = &snap.Clusters[i]
		}
	}
	if c == nil {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no cluster %s/%s that you may see", ns, name))
		return
	}
	var deps []DeploymentRow
	for i := range snap.Deployments {
		bd := &snap.Deployments[i]
		if bd.Labels[fleet.ClusterNamespaceLabel] == ns && bd.Labels[fleet.ClusterLabel] == name {
			deps = append(deps, deploymentRow(bd))
		}
	}
	sort.Slice(deps, func(i, j int) bool { return deps[i].Bundle < deps[j].Bundle })
	s.render(w, r, http.StatusOK, "cluster", page{Title: "Cluster " + ns + "/" + name, Section: "clusters", Live: true,
		Hidden: snap.Hidden, Data: struct {
			ClusterRow
			Conditions  []metav1.Condition
			Deployments []DeploymentRow
		}{clusterRow(snap, c, failingByCluster(snap), agentVersions(snap, snap.cells()), time.Now()), c.Status.Conditions, deps}})
}

// TokenRow is a registration token.
type TokenRow struct {
	Namespace, Name, TTL, Expires, State, Secret string
	Expired                                      bool
}

func (s *Server) tokens(w http.ResponseWriter, r *http.Request) {
	snap := s.read(w, r)
	if snap == nil {
		return
	}
	now := time.Now()
	rows := make([]TokenRow, 0, len(snap.Tokens))
	for i := range snap.Tokens {
		t := &snap.Tokens[i]
		row := TokenRow{Namespace: t.Namespace, Name: t.Name, Expires: "never", Secret: t.Status.SecretName}
		if t.Spec.TTL != nil {
			row.TTL = t.Spec.TTL.Duration.String()
		}
		if t.Status.Expires != nil {
			row.Expires = t.Status.Expires.UTC().Format(time.RFC3339)
			row.Expired = now.After(t.Status.Expires.Time)
		}
		row.State, _ = readyState(t.Status.Conditions)
		if meta.FindStatusCondition(t.Status.Conditions, fleet.ConditionReady) == nil && row.Secret != "" {
			row.State = "Issued"
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Namespace+"/"+rows[i].Name < rows[j].Namespace+"/"+rows[j].Name })
	s.render(w, r, http.StatusOK, "tokens", page{Title: "Registration tokens", Section: "tokens", Live: true,
		Hidden: snap.Hidden, Data: rows})
}

func (s *Server) capiView(w http.ResponseWriter, r *http.Request) {
	snap := s.read(w, r)
	if snap == nil {
		return
	}
	p, err := s.capiPage(r.Context(), userFrom(r.Context()), snap)
	if err != nil {
		ctrl.LoggerFrom(r.Context()).Error(err, "Reading the dashboard's Cluster API clusters")
		s.fail(w, r, http.StatusServiceUnavailable, "Cluster API's clusters could not be read now; try again")
		return
	}
	s.render(w, r, http.StatusOK, "capi", page{Title: "Cluster API clusters", Section: "capi", Live: true,
		Hidden: snap.Hidden, Data: p})
}
