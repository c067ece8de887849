package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// The kinds the dashboard reads, by resource name.
const (
	ResGitRepos    = "gitrepos"
	ResHelmOps     = "helmops"
	ResBundles     = "bundles"
	ResDeployments = "bundledeployments"
	ResClusters    = "clusters"
	ResGroups      = "clustergroups"
	ResTokens      = "clusterregistrationtokens"
)

// Resources are every kind the dashboard reads.
var Resources = []string{ResGitRepos, ResHelmOps, ResBundles, ResDeployments, ResClusters, ResGroups, ResTokens}

// Options configure a Server.
type Options struct {
	// Cache holds the objects, fed by watches; its informers tell the
	// server when to notify the pages.
	Cache cache.Cache
	// Resources are the kinds the cache may read (nil: all of Resources);
	// others are shown as not readable.
	Resources []string
	// Authenticator checks a request's token (bearer header or the cookie
	// the login page sets); required.
	Authenticator Authenticator
	// Authorizer filters what a user sees; required.
	Authorizer Authorizer
	// TokenInURL lets GET /login?token= log in (the one-time secret `fleet
	// dashboard` prints; never for real users' tokens).
	TokenInURL bool
	// Hosts, when set, are the only Host headers served (against DNS
	// rebinding of a loopback server).
	Hosts []string
	// Debounce is the least time between two change notifications (default
	// 300ms).
	Debounce time.Duration
	// Discovery, when set, tells whether the API server serves Cluster
	// API's Clusters: the server watches them (through Cache, whose scheme
	// must know them) once it does, looking every CAPICheckInterval
	// (default CAPICheckInterval) until then.
	Discovery         discovery.DiscoveryInterface
	CAPICheckInterval time.Duration
	// CAPINote, without Discovery, says why Cluster API's Clusters are not
	// shown (for example: the user may not list them).
	CAPINote string
}

// Server serves the dashboard.
type Server struct {
	o     Options
	pages map[string]*template.Template
	mux   *http.ServeMux
	hub   *hub
	capi  capiWatch
}

// New makes a server; call Start (or add it to a manager) to follow
// changes, and serve Handler.
func New(o Options) (*Server, error) {
	if o.Cache == nil || o.Authenticator == nil || o.Authorizer == nil {
		return nil, errors.New("dashboard: Cache, Authenticator and Authorizer are required")
	}
	if o.Resources == nil {
		o.Resources = Resources
	}
	if o.Debounce == 0 {
		o.Debounce = 300 * time.Millisecond
	}
	if o.CAPICheckInterval == 0 {
		o.CAPICheckInterval = CAPICheckInterval
	}
	s := &Server{o: o, pages: map[string]*template.Template{}, hub: newHub()}
	if o.Discovery == nil {
		s.capi.set(false, o.CAPINote)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("dashboard template %s: %w", n, err)
		}
		s.pages[base] = t
	}
	s.routes()
	return s, nil
}

// objectFor returns an empty object of a resource, for its informer.
func objectFor(resource string) client.Object {
	switch resource {
	case ResGitRepos:
		return &fleet.GitRepo{}
	case ResHelmOps:
		return &fleet.HelmOp{}
	case ResBundles:
		return &fleet.Bundle{}
	case ResDeployments:
		return &fleet.BundleDeployment{}
	case ResClusters:
		return &fleet.Cluster{}
	case ResGroups:
		return &fleet.ClusterGroup{}
	case ResTokens:
		return &fleet.ClusterRegistrationToken{}
	case ResCAPIClusters:
		return &clusterv1.Cluster{}
	}
	return nil
}

// Start follows every kind's informer until ctx ends, telling the pages
// when something changed (at most once per Debounce).
func (s *Server) Start(ctx context.Context) error {
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.hub.changed() },
		UpdateFunc: func(any, any) { s.hub.changed() },
		DeleteFunc: func(any) { s.hub.changed() },
	}
	for _, r := range s.o.Resources {
		inf, err := s.o.Cache.GetInformer(ctx, objectFor(r))
		if err != nil {
			return fmt.Errorf("dashboard: watching %s: %w", r, err)
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("dashboard: watching %s: %w", r, err)
		}
	}
	if s.o.Discovery != nil {
		go s.watchCAPI(ctx, h)
	}
	s.hub.run(ctx, s.o.Debounce)
	return nil
}

// NeedLeaderElection is false: every replica of the manager may serve.
func (s *Server) NeedLeaderElection() bool { return false }

// Serve serves Handler on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		// ctx has ended: shut down within a fresh deadline, keeping ctx's values.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Runnable runs the server in a controller-runtime manager: it follows the
// manager's cache and serves addr.
type Runnable struct {
	Server *Server
	Addr   string
}

// Start listens on Addr, follows changes and serves until ctx ends.
func (r Runnable) Start(ctx context.Context) error {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", r.Addr)
	if err != nil {
		return fmt.Errorf("dashboard: listening on %s: %w", r.Addr, err)
	}
	ctrl.LoggerFrom(ctx).Info("Serving the dashboard", "address", l.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- r.Server.Start(ctx) }()
	if err := r.Server.Serve(ctx, l); err != nil {
		return err
	}
	return <-errc
}

// NeedLeaderElection is false: every replica serves.
func (r Runnable) NeedLeaderElection() bool { return false }

// snapshot reads what u may see.
func (s *Server) snapshot(ctx context.Context, u *User) (*Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	snap := &Snapshot{}
	for _, r := range Resources {
		if !slices.Contains(s.o.Resources, r) {
			snap.Hidden = append(snap.Hidden, r)
			continue
		}
		var err error
		switch r {
		case ResGitRepos:
			snap.GitRepos, err = readAllowed[fleet.GitRepo](ctx, s, u, r, &fleet.GitRepoList{}, func(l *fleet.GitRepoList) []fleet.GitRepo { return l.Items })
		case ResHelmOps:
			snap.HelmOps, err = readAllowed[fleet.HelmOp](ctx, s, u, r, &fleet.HelmOpList{}, func(l *fleet.HelmOpList) []fleet.HelmOp { return l.Items })
		case ResBundles:
			snap.Bundles, err = readAllowed[fleet.Bundle](ctx, s, u, r, &fleet.BundleList{}, func(l *fleet.BundleList) []fleet.Bundle { return l.Items })
		case ResDeployments:
			snap.Deployments, err = readAllowed[fleet.BundleDeployment](ctx, s, u, r, &fleet.BundleDeploymentList{}, func(l *fleet.BundleDeploymentList) []fleet.BundleDeployment { return l.Items })
		case ResClusters:
			snap.Clusters, err = readAllowed[fleet.Cluster](ctx, s, u, r, &fleet.ClusterList{}, func(l *fleet.ClusterList) []fleet.Cluster { return l.Items })
		case ResGroups:
			snap.Groups, err = readAllowed[fleet.ClusterGroup](ctx, s, u, r, &fleet.ClusterGroupList{}, func(l *fleet.ClusterGroupList) []fleet.ClusterGroup { return l.Items })
		case ResTokens:
			snap.Tokens, err = readAllowed[fleet.ClusterRegistrationToken](ctx, s, u, r, &fleet.ClusterRegistrationTokenList{}, func(l *fleet.ClusterRegistrationTokenList) []fleet.ClusterRegistrationToken { return l.Items })
		}
		if err != nil {
			return nil, err
		}
	}
	return snap, nil
}

// readAllowed lists a kind from the cache and keeps the objects of the
// namespaces where u may list it.
func readAllowed[T any, PT interface {
	*T
	client.Object
}, L client.ObjectList](ctx context.Context, s *Server, u *User, resource string, list L, items func(L) []T) ([]T, error) {
	if err := s.o.Cache.List(ctx, list); err != nil {
		return nil, fmt.Errorf("reading %s: %w", resource, err)
	}
	all := items(list)
	ok, err := s.o.Authorizer.CanList(ctx, u, resource, "")
	if err != nil {
		return nil, err
	}
	if ok {
		return all, nil
	}
	var namespaces []string
	seen := map[string]bool{}
	for i := range all {
		if ns := PT(&all[i]).GetNamespace(); !seen[ns] {
			seen[ns] = true
			namespaces = append(namespaces, ns)
		}
	}
	allowed := make([]bool, len(namespaces))
	errs := make([]error, len(namespaces))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, ns := range namespaces {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			allowed[i], errs[i] = s.o.Authorizer.CanList(ctx, u, resource, ns)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for i, ns := range namespaces {
		keep[ns] = allowed[i]
	}
	var kept []T
	for i := range all {
		if keep[PT(&all[i]).GetNamespace()] {
			kept = append(kept, all[i])
		}
	}
	return kept, nil
}
