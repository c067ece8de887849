package dump

import (
	"context"
	"fmt"
	"io"
	"net/http"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/diagnose"
	"github.com/gitfleet/fleet/internal/names"
)

// apply keeps what f selects.
func apply(s *diagnose.Snapshot, f Filter) {
	keepCluster := func(c *fleet.Cluster) bool {
		return (f.Namespace == "" || c.Namespace == f.Namespace) && (f.Cluster == "" || c.Name == f.Cluster)
	}
	clusterNS := map[string]bool{}
	var clusters []fleet.Cluster
	for i := range s.Clusters {
		c := &s.Clusters[i]
		if keepCluster(c) {
			clusters = append(clusters, *c)
			clusterNS[names.ClusterNamespaceFor(c.Namespace, c.Name, c.Status.Namespace)] = true
		}
	}
	filterClusters := f.Namespace != "" || f.Cluster != ""
	keepBD := func(bd *fleet.BundleDeployment) bool {
		return (!filterClusters || clusterNS[bd.Namespace]) &&
			(f.GitRepo == "" || bd.Labels[fleet.RepoLabel] == f.GitRepo) &&
			(f.Bundle == "" || bd.Labels[fleet.BundleNameLabel] == f.Bundle) &&
			(f.Namespace == "" || bd.Labels[fleet.BundleNamespaceLabel] == f.Namespace || bd.Labels[fleet.AgentBundleLabel] == "true")
	}
	var bds []fleet.BundleDeployment
	bundles := map[string]bool{}
	for i := range s.BundleDeployments {
		bd := &s.BundleDeployments[i]
		if keepBD(bd) {
			bds = append(bds, *bd)
			bundles[bd.Labels[fleet.BundleNamespaceLabel]+"/"+bd.Labels[fleet.BundleNameLabel]] = true
		}
	}
	var bs []fleet.Bundle
	for i := range s.Bundles {
		b := &s.Bundles[i]
		keep := (f.Namespace == "" || b.Namespace == f.Namespace || clusterNS[b.Namespace]) &&
			(f.GitRepo == "" || b.Labels[fleet.RepoLabel] == f.GitRepo) &&
			(f.Bundle == "" || b.Name == f.Bundle) &&
			(f.Cluster == "" || bundles[b.Namespace+"/"+b.Name])
		if keep {
			bs = append(bs, *b)
		}
	}
	var repos []fleet.GitRepo
	for i := range s.GitRepos {
		g := &s.GitRepos[i]
		if (f.Namespace == "" || g.Namespace == f.Namespace) && (f.GitRepo == "" || g.Name == f.GitRepo) {
			repos = append(repos, *g)
		}
	}
	if f.Bundle != "" || f.Cluster != "" {
		// The GitRepos of the bundles kept.
		keep := map[string]bool{}
		for i := range bs {
			keep[bs[i].Namespace+"/"+bs[i].Labels[fleet.RepoLabel]] = true
		}
		repos = keepIf(repos, func(g *fleet.GitRepo) bool { return keep[g.Namespace+"/"+g.Name] })
	}
	var leases []coordinationv1.Lease
	for i := range s.Leases {
		if !filterClusters || clusterNS[s.Leases[i].Namespace] {
			leases = append(leases, s.Leases[i])
		}
	}
	s.Clusters, s.BundleDeployments, s.Bundles, s.GitRepos, s.Leases = clusters, bds, bs, repos, leases
	if f.GitRepo != "" || f.Bundle != "" || f.Cluster != "" {
		s.HelmOps = nil
	}
	// A Cluster API Cluster goes with the fleet Cluster of its name.
	s.CAPIClusters = keepIf(s.CAPIClusters, func(c *clusterv1.Cluster) bool {
		return (f.Namespace == "" || c.Namespace == f.Namespace) && (f.Cluster == "" || c.Name == f.Cluster)
	})
	if f.Namespace != "" {
		s.ClusterGroups = keepIf(s.ClusterGroups, func(g *fleet.ClusterGroup) bool { return g.Namespace == f.Namespace })
		s.Registrations = keepIf(s.Registrations, func(r *fleet.ClusterRegistration) bool { return r.Namespace == f.Namespace })
	}
}

func keepIf[T any](in []T, keep func(*T) bool) []T {
	var out []T
	for i := range in {
		if keep(&in[i]) {
			out = append(out, in[i])
		}
	}
	return out
}

// Redacted replaces what a dump leaves out.
const Redacted = "(left out of the dump)"

// Scrub removes from the objects what may carry a secret: a Bundle's
// resources (they may be Secrets), a registration's sealed credential, and
// every object's managedFields (size only); of Cluster API's Clusters it
// keeps only the metadata, spec.paused and the status' phase, conditions
// and initialization.
func Scrub(s *diagnose.Snapshot) {
	for i := range s.CAPIClusters {
		s.CAPIClusters[i] = capiSummary(&s.CAPIClusters[i])
	}
	for i := range s.Bundles {
		b := &s.Bundles[i]
		for j := range b.Spec.Resources {
			if b.Spec.Resources[j].Content != "" {
				b.Spec.Resources[j].Content, b.Spec.Resources[j].Encoding = Redacted, ""
			}
		}
		b.ManagedFields = nil
		delete(b.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
	}
	for i := range s.Registrations {
		if s.Registrations[i].Status.SealedCredential != "" {
			s.Registrations[i].Status.SealedCredential = Redacted
		}
		s.Registrations[i].ManagedFields = nil
	}
	for i := range s.BundleDeployments {
		s.BundleDeployments[i].ManagedFields = nil
	}
	for i := range s.Clusters {
		s.Clusters[i].ManagedFields = nil
	}
	for i := range s.GitRepos {
		s.GitRepos[i].ManagedFields = nil
	}
	for i := range s.HelmOps {
		s.HelmOps[i].ManagedFields = nil
	}
	for i := range s.Tokens {
		s.Tokens[i].ManagedFields = nil
	}
	for i := range s.ClusterGroups {
		s.ClusterGroups[i].ManagedFields = nil
	}
	for i := range s.Leases {
		s.Leases[i].ManagedFields = nil
	}
}

// capiSummary is what a dump keeps of a Cluster API Cluster: what tells
// whether and why not it is enrolled.
func capiSummary(c *clusterv1.Cluster) clusterv1.Cluster {
	out := clusterv1.Cluster{ObjectMeta: *c.ObjectMeta.DeepCopy(),
		Spec: clusterv1.ClusterSpec{Paused: c.Spec.Paused},
		Status: clusterv1.ClusterStatus{Phase: c.Status.Phase, Conditions: c.Status.Conditions,
			Initialization: c.Status.Initialization}}
	out.ManagedFields = nil
	delete(out.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
	return out
}

// eventsAbout keeps the events whose object is in the snapshot.
func eventsAbout(s *diagnose.Snapshot, events []corev1.Event) []corev1.Event {
	keep := map[string]bool{}
	add := func(kind, ns, name string) { keep[kind+"/"+ns+"/"+name] = true }
	for _, c := range s.Clusters {
		add("Cluster", c.Namespace, c.Name)
	}
	for _, b := range s.Bundles {
		add("Bundle", b.Namespace, b.Name)
	}
	for _, bd := range s.BundleDeployments {
		add("BundleDeployment", bd.Namespace, bd.Name)
	}
	for _, g := range s.GitRepos {
		add("GitRepo", g.Namespace, g.Name)
	}
	for _, h := range s.HelmOps {
		add("HelmOp", h.Namespace, h.Name)
	}
	for _, g := range s.ClusterGroups {
		add("ClusterGroup", g.Namespace, g.Name)
	}
	for _, r := range s.Registrations {
		add("ClusterRegistration", r.Namespace, r.Name)
	}
	for _, t := range s.Tokens {
		add("ClusterRegistrationToken", t.Namespace, t.Name)
	}
	var out []corev1.Event
	for _, e := range events {
		o := e.InvolvedObject
		if keep[o.Kind+"/"+o.Namespace+"/"+o.Name] {
			e.ManagedFields = nil
			out = append(out, e)
		}
	}
	return out
}

// maxMetrics bounds the metrics read.
const maxMetrics = 16 << 20

func fetch(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxMetrics))
}
