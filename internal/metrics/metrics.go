package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of counted outcomes.
const (
	ResultSuccess = "success"
	ResultError   = "error"
	// ResultGranted and ResultRefused are registration outcomes.
	ResultGranted = "granted"
	ResultRefused = "refused"
	// ResultInstalled and ResultFailed are agent install outcomes.
	ResultInstalled = "installed"
	ResultFailed    = "failed"
)

var (
	// Registrations counts ClusterRegistrations granted, and refusals (each
	// time a registration turns refused, with the refusal's reason).
	Registrations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_cluster_registrations_total",
		Help: "Cluster registrations granted, and refused by reason.",
	}, []string{"result", "reason"})

	// Imports counts the agent installs of manager-initiated registration
	// (Clusters with a kubeConfigSecret), by result.
	Imports = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_cluster_imports_total",
		Help: "Agent installs into imported clusters, by result (installed, failed).",
	}, []string{"result"})

	// FetchLatestCommit times asking a GitRepo's remote for the commit to
	// deploy (Fleet's name; by namespace, not by GitRepo).
	FetchLatestCommit = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fleet_gitrepo_fetch_latest_commit_duration_seconds",
		Help:    "Time to ask a GitRepo's remote for its latest commit, by namespace and result.",
		Buckets: fetchBuckets,
	}, []string{"namespace", "result"})

	// Checkout times fetching a commit into the git cache.
	Checkout = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fleet_gitrepo_checkout_duration_seconds",
		Help:    "Time to fetch a GitRepo's commit into the git cache and check it out, by namespace and result.",
		Buckets: fetchBuckets,
	}, []string{"namespace", "result"})

	// EventsDropped counts the events the Limiter dropped, by the limit
	// that dropped them (object, global).
	EventsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_events_dropped_total",
		Help: "Events not recorded because an object's burst or the global cap was used up.",
	}, []string{"limit"})
)

// fetchBuckets span a local clone (milliseconds) to a slow remote near the
// default fetch timeout (2m).
var fetchBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// updateNanos is the time the state handlers spent, read at scrape time:
// an atomic add per handler call costs less than a Prometheus counter.
var updateNanos atomic.Int64

func init() {
	ctrlmetrics.Registry.MustRegister(Registrations, Imports, FetchLatestCommit, Checkout, EventsDropped,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "fleet_metrics_update_seconds_total",
			Help: "Time the state gauges' event handlers spent keeping the gauges and recording state events.",
		}, func() float64 { return float64(updateNanos.Load()) / 1e9 }),
		collector, perObjectCollector)
}

// ObserveSince records the time since start on h for namespace, with the
// result of err.
func ObserveSince(h *prometheus.HistogramVec, namespace string, start time.Time, err error) {
	result := ResultSuccess
	if err != nil {
		result = ResultError
	}
	h.WithLabelValues(namespace, result).Observe(time.Since(start).Seconds())
}
