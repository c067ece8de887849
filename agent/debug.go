package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// upstreamRequests counts the agent's requests to the manager's API server by
// verb (WATCH, LIST and WATCHLIST, a list streamed over a watch, told apart
// from GET) and resource: what an idle agent
// costs its manager is read here, not guessed.
var upstreamRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "fleet_agent_upstream_requests_total",
	Help: "Requests of the agent to the manager's API server, by verb (GET, LIST, WATCH, PATCH, ...) and resource[/subresource].",
}, []string{"verb", "resource"})

func init() {
	ctrlmetrics.Registry.MustRegister(upstreamRequests)
}

// countUpstream returns a copy of cfg whose requests are counted in
// upstreamRequests.
func countUpstream(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt} })
	return cfg
}

type countingTransport struct{ next http.RoundTripper }

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := classify(req)
	upstreamRequests.WithLabelValues(verb, resource).Inc()
	return t.next.RoundTrip(req)
}

// classify names a Kubernetes API request as the API server's audit log
// would: its verb (a GET of a collection is LIST, with watch=true WATCH) and
// its resource, with the subresource after a slash.
func classify(req *http.Request) (verb, resource string) {
	segs := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		segs = segs[2:] // api/v1
	case len(segs) >= 3 && segs[0] == "apis":
		segs = segs[3:] // apis/group/version
	default:
		return req.Method, "other"
	}
	if len(segs) >= 3 && segs[0] == "namespaces" {
		segs = segs[2:]
	}
	if len(segs) == 0 {
		return req.Method, "other"
	}
	resource = segs[0]
	if len(segs) >= 3 {
		resource += "/" + segs[2]
	}
	verb = req.Method
	if verb == http.MethodGet {
		switch {
		case req.URL.Query().Get("sendInitialEvents") == "true":
			verb = "WATCHLIST" // a list streamed over a watch: every object again
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "WATCH"
		case len(segs) == 1:
			verb = "LIST"
		}
	}
	return verb, resource
}

// serveDebug serves Go's profiles (/debug/pprof/) and the agent's metrics
// (/metrics: the Go runtime's memory figures and the upstream request counts)
// on addr until ctx ends. It is off unless an address is given: profiles
// are for the person measuring the agent, on loopback.
func serveDebug(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/metrics", promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ctrl.LoggerFrom(ctx).Info("Debug server stopped", "reason", err.Error())
		}
	}()
	ctrl.LoggerFrom(ctx).Info("Serving profiles and metrics", "address", ln.Addr().String())
	return nil
}
