package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/google/pprof/profile"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The API server's CPU profile over an experiment, from its own
// /debug/pprof/profile (kube-apiserver --profiling), read with the admin
// client. Go serves one CPU profile of a fixed length per request and loses
// it when the request is cancelled, so the window is covered by consecutive
// short profiles that are merged at the end: the last one may run past the
// window by up to profileChunk, and the gaps between them (a request's
// round trip, longer on a busy machine) are not profiled: compare
// profile_cpu_s with apiserver_cpu_s to see how much of the window the
// profile holds.
const profileChunk = 5 // seconds

// apiProfiler collects the API server's CPU profile until stopped.
type apiProfiler struct {
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	chunks []*profile.Profile
	err    error
	// failed counts the pieces that could not be read, lastErr why.
	failed  int
	lastErr error
}

// profileEnabled turns the API server's CPU profile on (-apiserver-profile).
var profileEnabled = true

// startAPIProfile starts profiling the API server of cfg; nil when turned off.
func startAPIProfile(ctx context.Context, cfg *rest.Config) *apiProfiler {
	if !profileEnabled {
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	p := &apiProfiler{stop: make(chan struct{}), done: make(chan struct{}), err: err}
	if err != nil {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		// On a busy machine a piece may fail (a TLS handshake timing out):
		// the next one is tried, and only three failures in a row end it.
		failures := 0
		for {
			raw, err := cs.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", fmt.Sprint(profileChunk)).DoRaw(ctx)
			if err == nil {
				var prof *profile.Profile
				if prof, err = profile.Parse(bytes.NewReader(raw)); err == nil {
					p.mu.Lock()
					p.chunks = append(p.chunks, prof)
					p.mu.Unlock()
					failures = 0
				}
			}
			if err != nil {
				failures++
				p.mu.Lock()
				p.failed++
				p.lastErr = err
				p.mu.Unlock()
				if failures == 3 || ctx.Err() != nil {
					p.mu.Lock()
					p.err = fmt.Errorf("reading the API server's CPU profile (is --profiling on?): %w", err)
					p.mu.Unlock()
					return
				}
			}
			select {
			case <-p.stop:
				return
			default:
			}
		}
	}()
	return p
}

// Stop ends the profile after the chunk in flight and returns the merged
// profile.
func (p *apiProfiler) Stop() (*profile.Profile, error) {
	close(p.stop)
	<-p.done
	if p.err != nil {
		return nil, p.err
	}
	if len(p.chunks) == 0 {
		return nil, fmt.Errorf("no CPU profile of the API server was read")
	}
	return profile.Merge(p.chunks)
}

// stackCategory is a kind of API server work, known by the functions on
// the stack: a sample counts for a category when any of its frames' names
// contains one of the markers.
type stackCategory struct {
	name    string
	markers []string
}

// categoryExcept are, by category, the markers of stacks that do not count
// for it though they hold one of its markers.
var categoryExcept = map[string][]string{
	// The writes pass through the cacher on their way to etcd
	// (CacheDelegator): counted as watch dispatch, they made it look like
	// half the API server's CPU when it was about 1%.
	"watch_dispatch": {"k8s.io/apiserver/pkg/storage/cacher.(*CacheDelegator)"},
}

// apiCategories are the kinds of work the shares are reported for. They
// overlap (a status write's stack holds its etcd call and its JSON
// decoding), so the shares do not add up to 100%.
var apiCategories = []stackCategory{
	// The authorizers (RBAC, Node, the union that asks them), not the filter
	// that calls them: the whole request runs under that filter.
	{"authz", []string{"k8s.io/apiserver/pkg/authorization/", "k8s.io/kubernetes/plugin/pkg/auth/authorizer/"}},
	// Escalation checks on Role and RoleBinding writes (registration).
	{"rbac_writes", []string{"k8s.io/kubernetes/pkg/registry/rbac/"}},
	{"authn", []string{"k8s.io/apiserver/pkg/authentication/", "k8s.io/apiserver/plugin/pkg/authenticator/", "k8s.io/kubernetes/pkg/serviceaccount"}},
	{"admission", []string{"k8s.io/apiserver/pkg/admission", "k8s.io/kubernetes/plugin/pkg/admission/"}},
	// Status subresource writes from the storage's Update in: the patch
	// applied, validation, managed fields and the etcd transaction (not
	// the request's authentication, authorization and body decoding).
	{"status_writes", []string{".(*StatusREST)."}},
	// The patch itself applied to the stored object, by kind of patch:
	// server-side apply, and JSON merge (and strategic) patches.
	{"apply_patches", []string{"k8s.io/apiserver/pkg/endpoints/handlers.(*applyPatcher)"}},
	{"merge_patches", []string{"k8s.io/apiserver/pkg/endpoints/handlers.(*jsonPatcher)", "k8s.io/apiserver/pkg/endpoints/handlers.(*smpPatcher)"}},
	// Every write: its handler, and the storage call the handler runs on
	// another goroutine (the request finisher), known by the patcher and
	// the generic store's write methods.
	{"writes", []string{"k8s.io/apiserver/pkg/endpoints/handlers.UpdateResource", "k8s.io/apiserver/pkg/endpoints/handlers.PatchResource",
		"k8s.io/apiserver/pkg/endpoints/handlers.(*patcher)", "k8s.io/apiserver/pkg/endpoints/handlers.createHandler",
		"k8s.io/apiserver/pkg/endpoints/handlers.DeleteResource", "k8s.io/apiserver/pkg/endpoints/handlers.DeleteCollection",
		"k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Create", "k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Update",
		"k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Delete"}},
	// GETs and LISTs (watches are served under the list handler too, so
	// the list is known by handleList).
	{"reads", []string{"k8s.io/apiserver/pkg/endpoints/handlers.getResourceHandler", "k8s.io/apiserver/pkg/endpoints/handlers.handleList"}},
	// The watch cache sending each event to its watchers, and the watch
	// handlers encoding and writing them out.
	// (not the writes passing through it: categoryExcept).
	{"watch_dispatch", []string{"k8s.io/apiserver/pkg/storage/cacher."}},
	{"watch_serve", []string{"k8s.io/apiserver/pkg/endpoints/handlers.(*WatchServer)", "k8s.io/apiserver/pkg/endpoints/handlers.serveWatchHandler"}},
	{"etcd_client", []string{"go.etcd.io/etcd/client/", "k8s.io/apiserver/pkg/storage/etcd3.", "google.golang.org/grpc"}},
	{"serialization", []string{"encoding/json.", "sigs.k8s.io/json", "k8s.io/apimachinery/pkg/runtime/serializer", "github.com/json-iterator/",
		"k8s.io/apimachinery/pkg/util/json", "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured.", "github.com/fxamacker/cbor", "google.golang.org/protobuf"}},
	{"managed_fields", []string{"k8s.io/apimachinery/pkg/util/managedfields", "sigs.k8s.io/structured-merge-diff"}},
	{"cr_schema", []string{"k8s.io/apiextensions-apiserver/pkg/apiserver/schema", "k8s.io/apiextensions-apiserver/pkg/apiserver/validation",
		"k8s.io/kube-openapi/pkg/validation", "github.com/google/cel-go"}},
	{"audit", []string{"k8s.io/apiserver/pkg/audit", "k8s.io/apiserver/plugin/pkg/audit"}},
	{"tls", []string{"crypto/"}},
	{"gc", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc"}},
}

// cpuShares returns, for each category, the share of the profile's CPU time
// whose stacks hold it, and the profile's CPU seconds.
func cpuShares(p *profile.Profile) (map[string]float64, float64) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, 0
	}
	sums := make([]int64, len(apiCategories))
	var total int64
	for _, s := range p.Sample {
		v := s.Value[idx]
		total += v
		for ci, cat := range apiCategories {
			if stackHolds(s, cat.markers) && !stackHolds(s, categoryExcept[cat.name]) {
				sums[ci] += v
			}
		}
	}
	if total == 0 {
		return nil, 0
	}
	out := make(map[string]float64, len(apiCategories))
	for ci, cat := range apiCategories {
		out[cat.name] = float64(sums[ci]) / float64(total)
	}
	return out, float64(total) / 1e9
}

func stackHolds(s *profile.Sample, markers []string) bool {
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function == nil {
				continue
			}
			for _, m := range markers {
				if strings.Contains(line.Function.Name, m) {
					return true
				}
			}
		}
	}
	return false
}

// sharesText is the shares, most first: "authz 12%, etcd_client 9%, ...".
func sharesText(shares map[string]float64) string {
	names := make([]string, 0, len(shares))
	for n := range shares {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return shares[names[i]] > shares[names[j]] })
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f%%", n, 100*shares[n]))
	}
	return strings.Join(parts, ", ")
}

// profileDir, when set (-apiserver-profile-dir), receives each merged
// profile as <experiment>-<clusters>.pprof for `go tool pprof`.
var profileDir string

// finishProfile stops p and records its shares in r; problems are noted,
// not fatal: the experiment's other figures stand.
func finishProfile(p *apiProfiler, r *Result) {
	if p == nil {
		return
	}
	prof, err := p.Stop()
	if err != nil {
		r.Note = strings.TrimPrefix(r.Note+"; "+err.Error(), "; ")
		return
	}
	if p.failed > 0 {
		r.Note = strings.TrimPrefix(r.Note+fmt.Sprintf("; %d of %d pieces of the API server's profile not read (%v)",
			p.failed, p.failed+len(p.chunks), p.lastErr), "; ")
	}
	r.Shares, r.ProfileCPUS = cpuShares(prof)
	r.AuthzShare = r.Shares["authz"]
	if profileDir != "" {
		path := fmt.Sprintf("%s/apiserver-%s-%d.pprof", profileDir, r.Experiment, r.Clusters)
		if f, err := os.Create(path); err == nil {
			_ = prof.Write(f)
			_ = f.Close()
			fmt.Fprintf(os.Stderr, "The API server's CPU profile for %s: %s\n", r.Experiment, path)
		}
	}
}
