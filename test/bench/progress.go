package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/simagent"
)

// progressEvery is how often a scaling run prints where it is
// (-progress-every).
var progressEvery = 30 * time.Second

// progress prints, while a scaling run goes on, the figures it has so far
// (one JSON line on stderr, "progress" in it, every progressEvery): a run
// at 10,000 clusters takes long on a loaded machine, and one that has to
// be stopped still says how far it got and at what cost.
type progress struct {
	f *fleetRun
	// registered counts the agents holding their credential.
	registered atomic.Int64
	// agents are the registered agents, once all are (their Applied counts
	// what they reported Ready).
	agents atomic.Pointer[[]*simagent.Agent]

	mu sync.Mutex
	// phase is "register" or "ready", from phaseStart; cpuAtPhase is the
	// API server's CPU seconds then.
	phase      string
	phaseStart time.Time
	cpuAtPhase float64
	// last is the previous line's count, to give the rate over the last
	// interval beside the average.
	last     int64
	lastTime time.Time
}

// progressLine is one line of progress.
type progressLine struct {
	Progress string  `json:"progress"`
	Clusters int     `json:"clusters"`
	Bundles  int     `json:"bundles"`
	Phase    string  `json:"phase"`
	Elapsed  float64 `json:"elapsed_s"`
	// Registered and its rates: the average over the phase and over the
	// last interval.
	Registered     int64   `json:"registered,omitempty"`
	RegisterRate   float64 `json:"registered_per_s,omitempty"`
	RegisterRecent float64 `json:"registered_per_s_recent,omitempty"`
	// BDsCreated are the BundleDeployments made, as their agents saw them;
	// BDsReady those the agents reported Ready (their status written), and
	// BundlesReady the Ready the Bundles' summaries count (what the ready
	// experiment waits for).
	BDsCreated   int64   `json:"bds_created,omitempty"`
	BDsReady     int64   `json:"bds_ready,omitempty"`
	ReadyRate    float64 `json:"ready_per_s,omitempty"`
	ReadyRecent  float64 `json:"ready_per_s_recent,omitempty"`
	BundlesReady int     `json:"bundles_summary_ready,omitempty"`
	// The manager's peak and current memory, the API server's CPU over the
	// phase and per Ready BundleDeployment so far.
	ManagerRSSPeakMB float64 `json:"manager_rss_peak_mb"`
	ManagerRSSMB     float64 `json:"manager_rss_mb"`
	APIServerCPUS    float64 `json:"apiserver_cpu_s"`
	APIServerCPUMsBD float64 `json:"apiserver_cpu_ms_per_ready_bd,omitempty"`
	APIServerCPUMsRg float64 `json:"apiserver_cpu_ms_per_registration,omitempty"`
	Load1            float64 `json:"load1"`
}

// startProgress prints f's progress until ctx ends.
func startProgress(ctx context.Context, f *fleetRun) *progress {
	p := &progress{f: f}
	p.enter("start")
	go func() {
		t := time.NewTicker(max(progressEvery, time.Second))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.print(ctx)
			}
		}
	}()
	return p
}

// enter starts a phase; p may be nil.
func (p *progress) enter(phase string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase, p.phaseStart, p.cpuAtPhase = phase, time.Now(), apiServerCPU(p.f)
	p.last, p.lastTime = 0, p.phaseStart
}

// counter is where registrations are counted (nil without progress).
func (p *progress) counter() *atomic.Int64 {
	if p == nil {
		return nil
	}
	return &p.registered
}

// setAgents gives p the registered agents; p may be nil.
func (p *progress) setAgents(agents []*simagent.Agent) {
	if p != nil {
		p.agents.Store(&agents)
	}
}

func (p *progress) print(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	elapsed := now.Sub(p.phaseStart).Seconds()
	l := progressLine{Progress: "scaling", Clusters: p.f.n, Bundles: p.f.b, Phase: p.phase, Elapsed: elapsed,
		ManagerRSSPeakMB: peakRSSMB(p.f.mgr), ManagerRSSMB: rssMB(p.f.mgr.PID(), "VmRSS:"), Load1: loadAverage()}
	l.APIServerCPUS = apiServerCPU(p.f) - p.cpuAtPhase
	recent := func(count int64) float64 {
		d := now.Sub(p.lastTime).Seconds()
		r := float64(count-p.last) / d
		p.last, p.lastTime = count, now
		return r
	}
	switch p.phase {
	case "register":
		l.Registered = p.registered.Load()
		l.RegisterRate = float64(l.Registered) / elapsed
		l.RegisterRecent = recent(l.Registered)
		if l.Registered > 0 {
			l.APIServerCPUMsRg = 1000 * l.APIServerCPUS / float64(l.Registered)
		}
	case "ready":
		l.BDsCreated = p.f.seen.Load()
		if agents := p.agents.Load(); agents != nil {
			for _, a := range *agents {
				l.BDsReady += a.Applied.Load()
			}
		}
		l.ReadyRate = float64(l.BDsReady) / elapsed
		l.ReadyRecent = recent(l.BDsReady)
		if l.BDsReady > 0 {
			l.APIServerCPUMsBD = 1000 * l.APIServerCPUS / float64(l.BDsReady)
		}
		// Ten Bundles: a list that costs the API server little.
		list := &fleet.BundleList{}
		if err := p.f.c.List(ctx, list, client.InNamespace(fleet.DefaultWorkspace)); err == nil {
			for _, b := range list.Items {
				l.BundlesReady += b.Status.Summary.Ready
			}
		}
	}
	b, err := json.Marshal(l)
	if err != nil {
		return
	}
	fmt.Fprintln(os.Stderr, string(b))
}

// apiServerCPU is the CPU seconds f's API server has used.
func apiServerCPU(f *fleetRun) float64 {
	total := 0.0
	for _, pid := range f.cp.PIDs() {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmd), "kube-apiserver") {
			total += cpuOf(pid)
		}
	}
	return total
}
