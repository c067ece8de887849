package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Scaling runs registration and fan-out with simulated agents at each size,
// each on a fresh control plane and manager (nothing left from the size
// before), with the custom-resource ceiling measured on each, and reports
// the ready rate (BundleDeployments Ready per second, from the Bundles'
// creation to the last one counted Ready) at the largest size over the
// rate at the smallest. It runs without the audit log, which would slow
// the API server down.
func Scaling(ctx context.Context, sizes []int, b int) ([]Result, error) {
	var results []Result
	sum := Result{Experiment: "scaling", Bundles: b, ReadyRates: map[string]float64{}, CRCeilings: map[string]float64{}}
	var first, last Result
	for i, n := range sizes {
		rs, err := scalingRun(ctx, n, b)
		results = append(results, rs...)
		if err != nil {
			return results, fmt.Errorf("scaling to N=%d: %w", n, err)
		}
		var ready, cr Result
		for _, r := range rs {
			switch r.Experiment {
			case "ready":
				ready = r
			case "cr-ceiling":
				cr = r
			}
		}
		key := fmt.Sprintf("N=%d", n)
		sum.ReadyRates[key], sum.CRCeilings[key] = ready.Rate, cr.Rate
		if i == 0 {
			first = ready
		}
		last = ready
	}
	sum.Clusters, sum.Objects, sum.Seconds, sum.Rate = last.Clusters, last.Objects, last.Seconds, last.Rate
	sum.CRCeilingRatio = last.CRCeilingRatio
	sum.ScaleRatio = last.Rate / first.Rate
	// What the machine's load does not change: the API server's CPU per
	// Ready BundleDeployment at the smallest size over that at the largest
	// (the rate ratio to expect were its CPU the only limit).
	if last.APIServerCPUMsPerBD > 0 {
		sum.CPUScaleRatio = first.APIServerCPUMsPerBD / last.APIServerCPUMsPerBD
	}
	verdict := "below"
	if sum.ScaleRatio >= 0.75 {
		verdict = "meets"
	}
	sum.Note = fmt.Sprintf("ready rate at N=%d is %.0f%% of the rate at N=%d (%.0f/s vs %.0f/s): %s the goal of 75%%; of each size's custom-resource ceiling: %.0f%% and %.0f%%",
		last.Clusters, 100*sum.ScaleRatio, first.Clusters, last.Rate, first.Rate, verdict, 100*first.CRCeilingRatio, 100*last.CRCeilingRatio)
	sum.Note += fmt.Sprintf("; API server CPU per Ready BundleDeployment %.1f ms at N=%d, %.1f ms at N=%d (ratio %.2f)",
		first.APIServerCPUMsPerBD, first.Clusters, last.APIServerCPUMsPerBD, last.Clusters, sum.CPUScaleRatio)
	if last.APIServerCPUMsPerBDNet > 0 {
		sum.CPUScaleRatioNet = first.APIServerCPUMsPerBDNet / last.APIServerCPUMsPerBDNet
		sum.Note += fmt.Sprintf("; net of the standing cost of N agents joined (%.2f and %.2f cores): %.1f ms and %.1f ms (ratio %.2f)",
			first.APIServerIdleCores, last.APIServerIdleCores, first.APIServerCPUMsPerBDNet, last.APIServerCPUMsPerBDNet, sum.CPUScaleRatioNet)
	}
	printJSON(sum)
	return append(results, sum), nil
}

// scalingRun is one size: a fresh control plane, its custom-resource
// ceiling, a manager, n agents registering at once, b bundles to all.
func scalingRun(parent context.Context, n, b int) ([]Result, error) {
	// The agents' watches and the informers end with this size.
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	fmt.Fprintf(os.Stderr, "Scaling: a fresh control plane for N=%d clusters, B=%d bundles\n", n, b)
	cp, _, err := startControlPlane(fmt.Sprintf("bench-scaling-%d", n), false)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cp.Stop() }()
	cr, err := CRCeiling(ctx, cp, 32, max(2000, min(n*b, 10000)))
	if err != nil {
		return nil, fmt.Errorf("cr-ceiling: %w", err)
	}
	cr.Clusters = n
	printJSON(cr)
	f, err := startFleetRun(&fleetRun{cp: cp, n: n, b: b})
	if err != nil {
		return nil, err
	}
	defer f.mgr.Stop()
	// The progress ends before the manager and the control plane stop.
	progressCtx, stopProgress := context.WithCancel(ctx)
	defer stopProgress()
	f.progress = startProgress(progressCtx, f)
	start := time.Now()
	err = f.Register(ctx)
	if err == nil {
		err = f.FanoutReady(ctx, 0, cr.Rate)
	}
	results := append([]Result{cr}, f.results...)
	if err != nil {
		return results, fmt.Errorf("%w (manager log: %s)", err, f.mgr.Log)
	}
	fmt.Fprintf(os.Stderr, "Scaling: N=%d done in %s\n", n, time.Since(start).Round(time.Second))
	return results, nil
}
