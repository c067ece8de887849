package agent

import (
	"context"
	"errors"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitfleet/fleet/agent/backoff"
	"github.com/gitfleet/fleet/agent/bundledeployment"
	"github.com/gitfleet/fleet/agent/deployrpc"
	"github.com/gitfleet/fleet/agent/downstream"
	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/monitor"
	"github.com/gitfleet/fleet/agent/sealkey"
	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/enqueue"
)

// runDeployer runs the BundleDeployment controller until ctx ends. Should the
// controller's manager stop with an error, it is built again after a capped
// backoff: the agent never gives up on its manager.
func runDeployer(ctx context.Context, o Options, cred *upstream.Credential, keys *sealkey.Keys) {
	b := backoff.New(o.MinBackoff, o.MaxBackoff)
	for {
		started := time.Now()
		err := startDeployer(ctx, o, cred, keys)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			b.Reset()
		}
		if err == nil {
			err = errStopped
		}
		if !b.Wait(ctx, 0, "BundleDeployment controller stopped, starting it again", err) {
			return
		}
	}
}

// errStopped is the reason logged for a controller that stopped without an
// error.
var errStopped = errors.New("stopped")

// startDeployer builds a controller-runtime manager whose cache holds only
// the agent's cluster namespace upstream, wires the agent's own cluster
// (release records, drift correction, and the deploy binary that installs
// and uninstalls) and its monitor into the reconciler, and runs it.
func startDeployer(ctx context.Context, o Options, cred *upstream.Credential, keys *sealkey.Keys) error {
	cfg := countUpstream(cred.RESTConfig())
	// Watches are long requests: per-call timeouts are set by the callers.
	cfg.Timeout = 0
	cfg.QPS, cfg.Burst = 20, 40
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     kinds.Scheme(),
		Controller: enqueue.ControllerDefaults(),
		// The kinds are known: no discovery requests when thousands of
		// agents start at once.
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return upstream.Mapper(), nil },
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{cred.ClusterNamespace: {}},
			// The agent never reads managedFields: not kept in memory.
			DefaultTransform: cache.TransformStripManagedFields(),
			NewInformer:      resumingInformer(o.MinBackoff, o.MaxBackoff),
		},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Logger:                 ctrl.LoggerFrom(ctx).WithName("bundledeployments"),
	})
	if err != nil {
		return err
	}
	local, err := client.New(rest.CopyConfig(o.Local), client.Options{Scheme: kinds.Scheme()})
	if err != nil {
		return err
	}
	runner := &deployrpc.Runner{
		Binary: o.DeployBinary, Config: o.Local, Concurrency: o.DeployConcurrency,
		ClusterNamespace: cred.ClusterNamespace, SystemNamespace: o.Namespace,
		Timeout: o.DeployTimeout, MemoryLimit: o.DeployMemoryLimit, ChartCacheDir: o.ChartCacheDir,
	}
	down, err := downstream.New(o.Local, local, cred.ClusterNamespace, runner)
	if err != nil {
		return err
	}
	r := &bundledeployment.Reconciler{
		Upstream:         mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Cache:            mgr.GetCache(),
		ClusterNamespace: cred.ClusterNamespace,
		SealingKeys:      keys.Private,
		Local:            local,
		Downstream:       down,
		Watcher: &monitor.Watcher{
			Dynamic: down.Dynamic(), Mapper: down.Mapper(),
			NameLabel: fleet.ReleaseNameLabel, NamespaceLabel: fleet.ReleaseNamespaceLabel,
		},
		Workers:                   o.Workers,
		Resync:                    o.Resync,
		GarbageCollectionInterval: o.GarbageCollectionInterval,
		MinBackoff:                o.MinBackoff,
		MaxBackoff:                o.MaxBackoff,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
