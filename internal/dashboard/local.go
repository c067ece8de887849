package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/capienroll"
	"github.com/gitfleet/fleet/internal/scheme"
)

// LocalOptions configure a dashboard served on loopback with the caller's
// own credentials (`fleet dashboard`).
type LocalOptions struct {
	// Config is the caller's.
	Config *rest.Config
	// Workspaces are the namespaces to read when the caller may not list a
	// kind in every namespace (default: none, then such kinds are not
	// shown).
	Workspaces []string
	// Address is where to listen (default 127.0.0.1:0).
	Address string
}

// Local is a started loopback dashboard.
type Local struct {
	// URL opens the dashboard: it carries the one-time secret that logs the
	// browser in.
	URL      string
	server   *Server
	cache    cache.Cache
	listener net.Listener
}

// Plan says where to watch each kind: nil namespaces for every namespace;
// kinds absent from it are not readable.
type Plan map[string][]string

// PlanWatches asks the API server (SelfSubjectAccessReviews) where the
// caller may list each kind: everywhere, else in the given workspaces (and
// for BundleDeployments, in the namespaces of those workspaces' clusters).
func PlanWatches(ctx context.Context, cfg *rest.Config, workspaces []string) (Plan, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	can := func(resource, ns string) (bool, error) {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
				Verb: "watch", Group: fleet.GroupVersion.Group, Resource: resource, Namespace: ns}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking whether you may watch %s in %q: %w", resource, ns, err)
		}
		if !r.Status.Allowed {
			return false, nil
		}
		r, err = cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
				Verb: "list", Group: fleet.GroupVersion.Group, Resource: resource, Namespace: ns}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking whether you may list %s in %q: %w", resource, ns, err)
		}
		return r.Status.Allowed, nil
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	plan := Plan{}
	for _, r := range Resources {
		all, err := can(r, "")
		if err != nil {
			return nil, err
		}
		if all {
			plan[r] = nil
			continue
		}
		candidates := workspaces
		if r == ResDeployments {
			candidates, err = clusterNamespaces(ctx, c, plan, workspaces)
			if err != nil {
				return nil, err
			}
		}
		var keep []string
		for _, ns := range candidates {
			ok, err := can(r, ns)
			if err != nil {
				return nil, err
			}
			if ok {
				keep = append(keep, ns)
			}
		}
		if len(keep) > 0 {
			plan[r] = keep
		}
	}
	return plan, nil
}

// clusterNamespaces are the namespaces of the clusters of the workspaces
// the caller may list clusters in.
func clusterNamespaces(ctx context.Context, c client.Client, plan Plan, workspaces []string) ([]string, error) {
	nss, ok := plan[ResClusters]
	if !ok {
		return nil, nil
	}
	if nss == nil {
		nss = workspaces
	}
	set := map[string]bool{}
	for _, ws := range nss {
		var l fleet.ClusterList
		if err := c.List(ctx, &l, client.InNamespace(ws)); err != nil {
			return nil, fmt.Errorf("listing the clusters of %s: %w", ws, err)
		}
		for i := range l.Items {
			if n := l.Items[i].Status.Namespace; n != "" {
				set[n] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// CacheOptions are the options of a cache that watches what plan allows.
func (p Plan) CacheOptions() cache.Options {
	o := cache.Options{Scheme: scheme.New(clusterv1.AddToScheme), DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{}}
	for r, nss := range p {
		if nss == nil {
			continue
		}
		o.ByObject[objectFor(r)] = cache.ByObject{Namespaces: namespaceConfigs(nss)}
	}
	return o
}

func namespaceConfigs(nss []string) map[string]cache.Config {
	m := map[string]cache.Config{}
	for _, ns := range nss {
		m[ns] = cache.Config{}
	}
	return m
}

// planCAPI says where the caller may watch Cluster API's Clusters: nil
// namespaces for everywhere, else the workspaces where they may; or, in
// note, why they are not shown (not served, not allowed).
func planCAPI(ctx context.Context, cfg *rest.Config, dc discovery.DiscoveryInterface, workspaces []string) ([]string, string, error) {
	served, err := capienroll.Served(dc)
	if err != nil {
		return nil, "", fmt.Errorf("asking whether Cluster API is installed: %w", err)
	}
	if !served {
		// Installed later, it is shown after a restart of fleet dashboard.
		return nil, notServed + " (Restart fleet dashboard once it is.)", nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	group, resource := groupOf(ResCAPIClusters)
	can := func(ns string) (bool, error) {
		for _, verb := range []string{"watch", "list"} {
			r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
				Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
					Verb: verb, Group: group, Resource: resource, Namespace: ns}},
			}, metav1.CreateOptions{})
			if err != nil {
				return false, fmt.Errorf("asking whether you may %s %s in %q: %w", verb, ResCAPIClusters, ns, err)
			}
			if !r.Status.Allowed {
				return false, nil
			}
		}
		return true, nil
	}
	if ok, err := can(""); err != nil || ok {
		return nil, "", err
	}
	var keep []string
	for _, ns := range workspaces {
		ok, err := can(ns)
		if err != nil {
			return nil, "", err
		}
		if ok {
			keep = append(keep, ns)
		}
	}
	if len(keep) == 0 {
		return nil, "You may not list Cluster API clusters (clusters.cluster.x-k8s.io)" + inWorkspaces(workspaces) +
			": ask for read access to them, or name a workspace where you may with --workspace.", nil
	}
	return keep, "", nil
}

// Resources are the kinds the plan may read, in the order of Resources.
func (p Plan) Resources() []string {
	var out []string
	for _, r := range Resources {
		if _, ok := p[r]; ok {
			out = append(out, r)
		}
	}
	return out
}

// StartLocal plans the watches, starts the cache and waits for it to sync,
// and listens; Serve then serves until ctx ends.
func StartLocal(ctx context.Context, o LocalOptions) (*Local, error) {
	plan, err := PlanWatches(ctx, o.Config, o.Workspaces)
	if err != nil {
		return nil, err
	}
	if len(plan) == 0 {
		return nil, fmt.Errorf("your kubeconfig may not list any of fleet's kinds%s: ask for read access, or name a workspace you may read with --workspace", inWorkspaces(o.Workspaces))
	}
	dc, err := discovery.NewDiscoveryClientForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	capiNamespaces, capiNote, err := planCAPI(ctx, o.Config, dc, o.Workspaces)
	if err != nil {
		return nil, err
	}
	cacheOptions := plan.CacheOptions()
	var capiDiscovery discovery.DiscoveryInterface
	if capiNote == "" {
		capiDiscovery = dc
		if capiNamespaces != nil {
			cacheOptions.ByObject[objectFor(ResCAPIClusters)] = cache.ByObject{Namespaces: namespaceConfigs(capiNamespaces)}
		}
	}
	c, err := cache.New(o.Config, cacheOptions)
	if err != nil {
		return nil, err
	}
	secret, err := newSecret()
	if err != nil {
		return nil, err
	}
	addr := o.Address
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	hosts := []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("localhost:%d", port), fmt.Sprintf("[::1]:%d", port)}
	if h, _, err := net.SplitHostPort(addr); err == nil && h != "" && !slices.Contains([]string{"127.0.0.1", "localhost", "::1"}, h) {
		hosts = append(hosts, l.Addr().String())
	}
	s, err := New(Options{Cache: c, Resources: plan.Resources(), Authenticator: Secret(secret), Authorizer: AllowAll{},
		TokenInURL: true, Hosts: hosts, Discovery: capiDiscovery, CAPINote: capiNote})
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		_ = l.Close()
		return nil, fmt.Errorf("the watches of fleet's objects did not sync")
	}
	// Informers start on first use: make them now, so the first page is quick.
	for _, r := range plan.Resources() {
		if _, err := c.GetInformer(ctx, objectFor(r)); err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("watching %s: %w", r, err)
		}
	}
	u := url.URL{Scheme: "http", Host: hosts[0], Path: "/login", RawQuery: url.Values{"token": {secret}}.Encode()}
	return &Local{URL: u.String(), server: s, cache: c, listener: l}, nil
}

func inWorkspaces(ws []string) string {
	if len(ws) == 0 {
		return ""
	}
	return fmt.Sprintf(" in %v", ws)
}

func newSecret() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Serve follows changes and serves until ctx ends.
func (l *Local) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- l.server.Start(ctx) }()
	if err := l.server.Serve(ctx, l.listener); err != nil {
		return err
	}
	return <-errc
}
