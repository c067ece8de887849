package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/join"
	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/sealkey"
	"github.com/gitfleet/fleet/agent/upstream"
	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/version"
)

// DefaultGCPercent is the agent's garbage collection target (GOGC) unless
// the environment sets one. An idle agent's live heap is small and its
// allocations come in short bursts (a deploy): a heap allowed to grow to
// half again its live size, rather than twice it, keeps the footprint of an
// edge cluster's agent down, at a CPU cost paid only while it deploys.
const DefaultGCPercent = 50

// Options configure an agent.
type Options struct {
	// Namespace is the agent's system namespace in its own cluster.
	Namespace string
	// Local is the REST config of the agent's own cluster.
	Local *rest.Config
	// CheckinInterval is how often the agent reports it is alive (default 15m).
	CheckinInterval time.Duration
	// MinBackoff and MaxBackoff bound retries against an unreachable manager
	// or cluster.
	MinBackoff, MaxBackoff time.Duration
	// Resync is how often every BundleDeployment is checked again without an
	// event (default 5m); drift is seen at once through watches.
	Resync time.Duration
	// GarbageCollectionInterval is how often releases of deleted
	// BundleDeployments are looked for (default Resync; the agent
	// ConfigMap's garbageCollectionInterval sets it).
	GarbageCollectionInterval time.Duration
	// Workers is the number of BundleDeployments deployed at once (default 4).
	Workers int
	// LeaderElect makes this replica work only while it holds the Lease
	// fleet-agent in Namespace; LeaseDuration (default 15s) and Identity
	// (default hostname and a random suffix) tune it.
	LeaderElect   bool
	LeaseDuration time.Duration
	Identity      string
	// RotateCredentialBefore is how much of the credential's lifetime may
	// remain at most when the agent renews it (default a third of it).
	RotateCredentialBefore time.Duration
	// BootstrapCheckInterval is how often the agent looks for a new
	// bootstrap Secret placed while it runs (default 15s).
	BootstrapCheckInterval time.Duration
	// AddressCheckInterval is how often the agent reads the address its
	// manager publishes, to follow it when it moves (default 15m).
	AddressCheckInterval time.Duration
	// DeployBinary is the fleet-agent-deploy binary that installs, upgrades
	// and uninstalls releases, one process per operation: a path, or a
	// name looked up beside the agent's executable, then in $PATH (default
	// fleet-agent-deploy).
	DeployBinary string
	// DeployConcurrency bounds the deploy binaries running at once
	// (default deployrpc.DefaultConcurrency).
	DeployConcurrency int
	// DeployTimeout and DeployMemoryLimit bound each run of the deploy
	// binary in time and in mapped memory (bytes): one that meets a bound
	// is stopped, its BundleDeployment reports which, and its slot goes to
	// the next deploy (defaults deployrpc.DefaultTimeout and
	// deployrpc.DefaultMemoryLimit).
	DeployTimeout     time.Duration
	DeployMemoryLimit int64
	// ChartCacheDir is where the deploy binaries keep the charts they
	// download for HelmOps, to deploy them again without downloading them;
	// empty keeps none.
	ChartCacheDir string
	// DebugAddress, when set, is where the agent serves Go's profiles and
	// its metrics (Go memory figures, requests to the manager by verb).
	DebugAddress string

	checkinSet bool
}

// configured is what the fleet-agent ConfigMap says of the agent's run:
// its check-in and garbage collection intervals and TLS mode.
type configured struct {
	checkin, garbageCollection time.Duration
	tlsMode                    string
}

// readConfigured reads the fleet-agent ConfigMap; what is missing or
// invalid keeps the agent's defaults.
func readConfigured(ctx context.Context, local client.Client, namespace string) configured {
	cm := &corev1.ConfigMap{}
	if err := local.Get(ctx, client.ObjectKey{Namespace: namespace, Name: fleet.AgentName}, cm); err != nil {
		return configured{}
	}
	cfg, err := agentinstall.ReadConfig(cm)
	if err != nil {
		return configured{}
	}
	duration := func(key, v string) time.Duration {
		if v == "" {
			return 0
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("Ignoring an invalid duration in the agent ConfigMap", "key", key, "value", v)
			return 0
		}
		return d
	}
	return configured{checkin: duration("checkinInterval", cfg.CheckinInterval),
		garbageCollection: duration("garbageCollectionInterval", cfg.GarbageCollectionInterval), tlsMode: cfg.AgentTLSMode}
}

// Run registers (or reuses the stored credential) and then keeps the agent's
// loops running until ctx ends; with LeaderElect, only while this replica
// leads.
func Run(ctx context.Context, o Options) error {
	if o.Namespace == "" {
		o.Namespace = fleet.DefaultSystemNamespace
	}
	// The flags' documented defaults, for every loop: a check-in or watch
	// that cannot reach the manager backs off to a minute, not a second.
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Minute
	}
	if o.DebugAddress != "" {
		if err := serveDebug(ctx, o.DebugAddress); err != nil {
			return fmt.Errorf("serving profiles on %s: %w", o.DebugAddress, err)
		}
	}
	go returnMemoryWhenIdle(ctx)
	if o.LeaderElect {
		return runElected(ctx, o, func(ctx context.Context) error { return runRegistered(ctx, o) })
	}
	return runRegistered(ctx, o)
}

// runRegistered runs the agent, and again from registration on whenever a
// run ends to register again (see move.go): an admin renewing the cluster's
// registration, or moving it to another manager, or the manager moving
// itself, needs no restart of the agent. Releases stay installed in
// between; the next run adopts them.
func runRegistered(ctx context.Context, o Options) error {
	for {
		err := run(ctx, o)
		if !errors.Is(err, errRestart) {
			return err
		}
	}
}

func run(ctx context.Context, o Options) error {
	log := ctrl.LoggerFrom(ctx)
	o.checkinSet = o.CheckinInterval > 0
	if !o.checkinSet {
		o.CheckinInterval = 15 * time.Minute
	}
	if o.Local.QPS == 0 {
		// Helm makes many small requests per release; client-go's default
		// of 5 per second would make a cluster of many bundles crawl.
		o.Local = rest.CopyConfig(o.Local)
		o.Local.QPS, o.Local.Burst = 50, 100
	}
	local, err := client.New(o.Local, client.Options{Scheme: kinds.Scheme()})
	if err != nil {
		return fmt.Errorf("connecting to the agent's own cluster: %w", err)
	}
	cred, err := join.Ensure(ctx, join.Options{
		Namespace: o.Namespace, Local: local, MinBackoff: o.MinBackoff, MaxBackoff: o.MaxBackoff,
	})
	if err != nil {
		return err
	}
	conf := readConfigured(ctx, local, o.Namespace)
	cred.TLSMode = conf.tlsMode
	if conf.garbageCollection > 0 {
		o.GarbageCollectionInterval = conf.garbageCollection
	}
	// A bootstrap still there was tried and did not work (registration
	// went on with the stored credential): only a newer one counts.
	seen, err := bootstrapVersion(ctx, local, o.Namespace)
	if err != nil {
		return fmt.Errorf("reading the bootstrap secret: %w", err)
	}
	keys, err := sealkey.Load(ctx, local, o.Namespace, cred.ClusterNamespace)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	renew := make(chan struct{})
	w := &restartWatch{local: local, namespace: o.Namespace, seen: seen, cred: cred, every: o.BootstrapCheckInterval,
		retryPending: o.MaxBackoff, addressEvery: o.AddressCheckInterval}
	if w.every <= 0 {
		w.every = 15 * time.Second
	}
	if w.addressEvery <= 0 {
		w.addressEvery = DefaultAddressCheckInterval
	}
	// Before any client is built: they all send the rotated token.
	rotator := upstream.NewRotator(cred, upstream.RotateOptions{
		Namespace: o.Namespace, Local: local, Before: o.RotateCredentialBefore, MinBackoff: o.MinBackoff, MaxBackoff: o.MaxBackoff,
		OnRotate: keys.Rotate,
	})
	// After NewRotator: the watch reads the rotated token.
	go func() {
		if w.wait(ctx) {
			close(renew)
			cancel()
		}
	}()
	manager, err := upstream.NewClient(countUpstream(cred.RESTConfig()))
	if err != nil {
		return err
	}
	if conf.checkin > 0 && !o.checkinSet {
		o.CheckinInterval = conf.checkin
	}
	log.Info("Agent running", "cluster", cred.Namespace+"/"+cred.ClusterName, "checkinInterval", o.CheckinInterval, "version", version.Get())
	// The agent says where it runs (in its Lease): the manager deploys the
	// agent's own Bundle (its Deployment) there.
	hb := &Heartbeat{Client: manager, ClusterNamespace: cred.ClusterNamespace, AgentNamespace: o.Namespace, Interval: o.CheckinInterval,
		SealingKey: keys.PublicKey, MinBackoff: o.MinBackoff, MaxBackoff: o.MaxBackoff}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		hb.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		rotator.Run(ctx)
	}()
	runDeployer(ctx, o, cred, keys)
	wg.Wait()
	select {
	case <-renew:
		return errRestart
	default:
		return nil
	}
}
