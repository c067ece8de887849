package main

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// The simulated agents run in the bench process, on the machine that also
// runs the API server and the manager: what they spend is what real agents
// would spend in their own clusters. Their goroutines carry a profiler
// label, and the bench's own CPU profile over an experiment tells their CPU
// apart from the bench's clients (selfProfiler).

// simAgentLabel labels the simulated agents' goroutines (and those they
// start: their connections' readers and writers).
var simAgentLabel = pprof.Labels("bench", "simagent")

// runSimAgent runs fn on a new goroutine labelled as a simulated agent's.
func runSimAgent(ctx context.Context, fn func(context.Context)) {
	go pprof.Do(ctx, simAgentLabel, fn)
}

// selfProfiler is this process's CPU profile over one experiment; nil when
// it could not be started (-self-profile holds the profiler).
type selfProfiler struct{ buf bytes.Buffer }

func startSelfProfile() *selfProfiler {
	p := &selfProfiler{}
	if err := pprof.StartCPUProfile(&p.buf); err != nil {
		return nil
	}
	return p
}

// finish stops the profile and records in r the CPU the simulated agents
// spent (per BundleDeployment when r counts them).
func (p *selfProfiler) finish(r *Result) {
	if p == nil {
		return
	}
	pprof.StopCPUProfile()
	if r == nil {
		return
	}
	prof, err := profile.Parse(&p.buf)
	if err != nil {
		r.Note = strings.TrimPrefix(r.Note+"; reading the bench's own CPU profile: "+err.Error(), "; ")
		return
	}
	r.SimAgentCPUS = simAgentSeconds(prof)
	if r.Objects > 0 && (r.Experiment == "ready" || strings.HasPrefix(r.Experiment, "commit")) {
		r.SimAgentCPUMsPerBD = 1000 * r.SimAgentCPUS / float64(r.Objects)
	}
}

// simAgentSeconds sums the CPU of the samples labelled as the simulated
// agents'.
func simAgentSeconds(prof *profile.Profile) float64 {
	i := slices.IndexFunc(prof.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
	if i < 0 {
		return 0
	}
	var ns int64
	for _, s := range prof.Sample {
		if slices.Contains(s.Label["bench"], "simagent") {
			ns += s.Value[i]
		}
	}
	return float64(ns) / 1e9
}

// cpuNote says, for an experiment with simulated agents, what the
// management side (API server, etcd, manager) spent per BundleDeployment
// without the simulated agents, beside what the floor spent (its clients
// are not counted either): the ratio the rate would have were the machine's
// CPU the only limit.
func cpuNote(r *Result, floor Result) {
	if r.Objects == 0 || floor.Objects == 0 || floor.APIServerCPUS+floor.EtcdCPUS == 0 {
		return
	}
	mgmt := 1000 * (r.APIServerCPUS + r.EtcdCPUS + r.ManagerCPUS) / float64(r.Objects)
	fl := 1000 * (floor.APIServerCPUS + floor.EtcdCPUS) / float64(floor.Objects)
	r.ManagementCPUMsPerBD, r.CPUFloorRatio = mgmt, fl/mgmt
	r.Note += fmt.Sprintf("; simulated agents' CPU %.1f s (%.2f ms per BundleDeployment, not counted); API server, etcd and manager %.2f ms per BundleDeployment, %s %.2f: CPU ratio to the floor %.2f",
		r.SimAgentCPUS, r.SimAgentCPUMsPerBD, mgmt, floor.Experiment, fl, r.CPUFloorRatio)
}
