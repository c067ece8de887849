package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
)

func newClient(cfg *rest.Config) (client.Client, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0 // no client-side throttling: measure the server
	return client.New(c, client.Options{Scheme: controllers.Scheme()})
}

// parallel runs fn(i) for i in [0,n) on `workers` goroutines.
func parallel(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || firstErr.Load() != nil {
					return
				}
				if err := fn(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	return nil
}

// Ceiling measures raw creates/s of small ConfigMaps with `clients` clients.
func Ceiling(ctx context.Context, cp *controlplane.ControlPlane, clients, count int) (Result, error) {
	cs := make([]client.Client, clients)
	for i := range cs {
		c, err := newClient(cp.Config)
		if err != nil {
			return Result{}, err
		}
		cs[i] = c
	}
	ns := "bench-ceiling"
	if err := cs[0].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return Result{}, err
	}
	start := time.Now()
	err := parallel(clients, count, func(i int) error {
		return cs[i%clients].Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: ns},
			Data:       map[string]string{"k": "v"},
		})
	})
	s := since(start)
	r := Result{Experiment: "ceiling", Objects: count, Seconds: s, Rate: float64(count) / s, Load1: loadAverage()}
	if err != nil {
		return r, err
	}
	// What the management cluster holds later is the fleet's alone.
	return r, cs[0].DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns))
}

// CRCeiling measures raw creates/s of BundleDeployments (a custom resource,
// like everything the manager writes) with `clients` clients and no manager.
func CRCeiling(ctx context.Context, cp *controlplane.ControlPlane, clients, count int) (Result, error) {
	c, err := newClient(cp.Config)
	if err != nil {
		return Result{}, err
	}
	ns := "bench-cr-ceiling"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return Result{}, err
	}
	start := time.Now()
	err = parallel(clients, count, func(i int) error {
		return c.Create(ctx, &fleet.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bd-%d", i), Namespace: ns,
				Labels: map[string]string{fleet.BundleNameLabel: "b", fleet.ClusterLabel: "c"}},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-0123:abcd", StagedDeploymentID: "s-0123:abcd"},
		})
	})
	s := since(start)
	r := Result{Experiment: "cr-ceiling", Objects: count, Seconds: s, Rate: float64(count) / s, Load1: loadAverage(),
		Note: "BundleDeployments created directly: the API server's limit for custom resources"}
	if err != nil {
		return r, err
	}
	// Nothing of them stays to weigh on the experiments after (the watch
	// cache holds every BundleDeployment).
	return r, c.DeleteAllOf(ctx, &fleet.BundleDeployment{}, client.InNamespace(ns))
}

// Fanout creates N clusters, starts the manager, creates B bundles of 10 KB
// and times until N*B BundleDeployments exist.
func Fanout(ctx context.Context, cp *controlplane.ControlPlane, n, b int) (Result, error) {
	c, err := newClient(cp.Config)
	if err != nil {
		return Result{}, err
	}
	for _, ns := range []string{fleet.DefaultWorkspace} {
		_ = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	fmt.Fprintf(os.Stderr, "Creating %d clusters\n", n)
	if err := parallel(32, n, func(i int) error {
		return c.Create(ctx, &fleet.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c-%05d", i), Namespace: fleet.DefaultWorkspace,
				Labels: map[string]string{"env": []string{"dev", "test", "prod"}[i%3], "bench": "true"}},
			Spec: fleet.ClusterSpec{ClientID: fmt.Sprintf("bench-%d", i)},
		})
	}); err != nil {
		return Result{}, err
	}

	mgr, err := startManager(cp)
	if err != nil {
		return Result{}, err
	}
	defer mgr.Stop()

	// Wait until the manager made every cluster namespace, so the fanout
	// measures targeting, not namespace creation.
	if err := waitFor(ctx, 5*time.Minute, func() (bool, error) {
		list := &fleet.ClusterList{}
		if err := c.List(ctx, list, client.InNamespace(fleet.DefaultWorkspace)); err != nil {
			return false, err
		}
		for _, cl := range list.Items {
			if cl.Status.Namespace == "" {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return Result{}, fmt.Errorf("waiting for cluster namespaces: %w (manager log: %s)", err, mgr.Log)
	}

	counter, err := countAdds(ctx, cp.Config, fleet.GroupVersion.WithKind("BundleDeployment"))
	if err != nil {
		return Result{}, err
	}
	cpuBefore := cpuSeconds(mgr)
	metricsBefore := mgr.metricsUpdateSeconds()
	before := takeUsage(ctx, cp)
	fmt.Fprintf(os.Stderr, "Creating %d bundles of 10 KB\n", b)
	start := time.Now()
	if err := createBundles(ctx, c, b); err != nil {
		return Result{}, err
	}
	want := int64(n * b)
	if err := waitFor(ctx, 30*time.Minute, func() (bool, error) { return counter.Load() >= want, nil }); err != nil {
		return Result{}, fmt.Errorf("%d of %d BundleDeployments after the wait: %w", counter.Load(), want, err)
	}
	s := since(start)
	r := Result{Experiment: "fanout", Clusters: n, Bundles: b, Objects: int(want), Seconds: s, Rate: float64(want) / s,
		ManagerRSSMB: peakRSSMB(mgr), ManagerCPUS: cpuSeconds(mgr) - cpuBefore}
	r.setMetricsCPU(mgr.metricsUpdateSeconds() - metricsBefore)
	before.since(ctx, cp, &r)
	return r, nil
}

// createBundles creates b bundles of one 10 KB ConfigMap each, targeting
// every cluster labelled bench=true.
func createBundles(ctx context.Context, c client.Client, b int) error {
	payload := strings.Repeat("x", 10*1024)
	return parallel(8, b, func(i int) error {
		return c.Create(ctx, &fleet.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b-%03d", i), Namespace: fleet.DefaultWorkspace},
			Spec: fleet.BundleSpec{
				Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: fmt.Sprintf(
					"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b-%d}\ndata: {payload: %s}\n", i, payload)}},
				Targets: []fleet.BundleTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench": "true"}}}},
			},
		})
	})
}

// countAdds counts objects added, through a metadata-only informer.
func countAdds(ctx context.Context, cfg *rest.Config, gvk schema.GroupVersionKind) (*atomic.Int64, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: controllers.Scheme()})
	if err != nil {
		return nil, err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	var n atomic.Int64
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(o interface{}) {
		// Only what the manager wrote; the cr-ceiling objects are not.
		if m, ok := o.(*metav1.PartialObjectMetadata); ok && m.Labels[fleet.ManagedLabel] == "true" {
			n.Add(1)
		}
	}}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("informer did not sync")
	}
	return &n, nil
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	return waitEvery(ctx, 20*time.Millisecond, timeout, cond)
}

// waitEvery checks cond every interval: conditions that list objects are
// checked less often, so that the checking does not load the API server.
func waitEvery(ctx context.Context, interval, timeout time.Duration, cond func() (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(context.Context) (bool, error) { return cond() })
}

// waitWritesSettle waits until the API server's write counters have not
// moved for quiet (at most limit), so that a window's count holds the
// writes that follow its last event (the manager's status updates after a
// registration or a heartbeat). It returns when they settled.
func waitWritesSettle(ctx context.Context, cp *controlplane.ControlPlane, quiet, limit time.Duration) time.Time {
	deadline := time.Now().Add(limit)
	last, lastChange := -1.0, time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		reqs, err := apiRequests(ctx, cp.Config)
		if err != nil {
			break
		}
		total := writesTotal(nil, reqs)
		if total != last {
			last, lastChange = total, time.Now()
		} else if time.Since(lastChange) >= quiet {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	return lastChange
}

// usage is what the control plane and this process had done when an
// experiment started: API requests by kind, and CPU seconds.
type usage struct {
	requests                      map[string]float64
	apiserverCPU, etcdCPU, ownCPU float64
}

func takeUsage(ctx context.Context, cp *controlplane.ControlPlane) usage {
	u := usage{ownCPU: cpuOf(os.Getpid())}
	u.requests, _ = apiRequests(ctx, cp.Config)
	for _, pid := range cp.PIDs() {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmd), "kube-apiserver") {
			u.apiserverCPU += cpuOf(pid)
		} else {
			u.etcdCPU += cpuOf(pid)
		}
	}
	return u
}

// since fills r with what was done from u until now.
func (u usage) since(ctx context.Context, cp *controlplane.ControlPlane, r *Result) {
	now := takeUsage(ctx, cp)
	if u.requests != nil && now.requests != nil {
		r.APIWrites = writesSince(u.requests, now.requests)
		r.APIReads = readsSince(u.requests, now.requests)
		r.APIWritesTotal = writesTotal(u.requests, now.requests)
	}
	r.APIServerCPUS = now.apiserverCPU - u.apiserverCPU
	r.EtcdCPUS = now.etcdCPU - u.etcdCPU
	r.BenchCPUS = now.ownCPU - u.ownCPU
	r.Load1 = loadAverage()
}

// loadAverage is the machine's one-minute load average (0 if unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	l, _ := strconv.ParseFloat(f[0], 64)
	return l
}

// peakRSSMB reads VmHWM of a process.
func peakRSSMB(p *manager) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// cpuSeconds reads user+system CPU time of a process.
func cpuSeconds(p *manager) float64 { return cpuOf(p.PID()) }

// cpuOf reads user+system CPU time of the process pid.
func cpuOf(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // clock ticks (USER_HZ = 100)
}
