package agent

import (
	"context"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitfleet/fleet/agent/controller"
	"github.com/gitfleet/fleet/agent/deployrpc"
	"github.com/gitfleet/fleet/agent/downstream"
	"github.com/gitfleet/fleet/agent/monitor"
	"github.com/gitfleet/fleet/agent/registration"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/enqueue"
)

// runDeployer runs the BundleDeployment controller until ctx ends. Should the
// controller's manager stop with an error, it is built again after a capped
// backoff: the agent never gives up on its manager.
func runDeployer(ctx context.Context, o Options, cred *registration.Credential) {
	log := ctrl.LoggerFrom(ctx)
	b := &registration.Backoff{Min: max(o.MinBackoff, 100*time.Millisecond), Max: max(o.MaxBackoff, time.Second)}
	for {
		started := time.Now()
		err := startDeployer(ctx, o, cred)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			b.Reset()
		}
		wait := b.Next()
		reason := "stopped"
		if err != nil {
			reason = err.Error()
		}
		log.Info("BundleDeployment controller stopped, starting it again", "reason", reason, "retryIn", wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// startDeployer builds a controller-runtime manager whose cache holds only
// the agent's cluster namespace upstream, wires the agent's own cluster
// (release records, drift correction, and the deploy binary that installs
// and uninstalls) and its monitor into the reconciler, and runs it.
func startDeployer(ctx context.Context, o Options, cred *registration.Credential) error {
	upstream := countUpstream(cred.RESTConfig())
	// Watches are long requests: per-call timeouts are set by the callers.
	upstream.Timeout = 0
	upstream.QPS, upstream.Burst = 20, 40
	mgr, err := ctrl.NewManager(upstream, ctrl.Options{
		Scheme:     registration.Scheme(),
		Controller: enqueue.ControllerDefaults(),
		// The kinds are known: no discovery requests when thousands of
		// agents start at once.
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return registration.UpstreamMapper(), nil },
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{cred.ClusterNamespace: {}},
			// The agent never reads managedFields: not kept in memory.
			DefaultTransform: cache.TransformStripManagedFields(),
			NewInformer:      resumingInformer(o.MinBackoff, o.MaxBackoff),
		},
		Client: client.Options{Cache: &client.CacheOptions{
			// The agent may get these, not list or watch them.
			DisableFor: []client.Object{&fleet.Content{}, &corev1.Secret{}, &corev1.ConfigMap{}, &fleet.Cluster{}},
		}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Logger:                 ctrl.LoggerFrom(ctx).WithName("bundledeployments"),
	})
	if err != nil {
		return err
	}
	local, err := client.New(rest.CopyConfig(o.Local), client.Options{Scheme: registration.Scheme()})
	if err != nil {
		return err
	}
	runner := &deployrpc.Runner{
		Binary: o.DeployBinary, Config: o.Local, Concurrency: o.DeployConcurrency,
		ClusterNamespace: cred.ClusterNamespace, SystemNamespace: o.Namespace,
		Timeout: o.DeployTimeout, MemoryLimit: o.DeployMemoryLimit,
	}
	down, err := downstream.New(o.Local, local, cred.ClusterNamespace, runner)
	if err != nil {
		return err
	}
	r := &controller.Reconciler{
		Upstream:         mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Cache:            mgr.GetCache(),
		ClusterNamespace: cred.ClusterNamespace,
		Downstream:       down,
		Watcher: &monitor.Watcher{
			Dynamic: down.Dynamic(), Mapper: down.Mapper(),
			NameLabel: fleet.ReleaseNameLabel, NamespaceLabel: fleet.ReleaseNamespaceLabel,
		},
		Workers:    o.Workers,
		Resync:     o.Resync,
		MinBackoff: o.MinBackoff,
		MaxBackoff: o.MaxBackoff,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
