package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/framework"
)

// DashboardOptions are the dashboard experiment's flags.
type DashboardOptions struct {
	// Updates is how many BundleDeployment status changes are driven while
	// a page follows the server's events.
	Updates int
	// Rate is how many of them per second.
	Rate float64
	// Idle is the window over which the server's idle CPU is measured.
	Idle time.Duration
}

var dashboardOpts DashboardOptions

// pageFigures are one page's first fetch.
type pageFigures struct {
	Path    string  `json:"path"`
	Seconds float64 `json:"seconds"`
	Bytes   int     `json:"bytes"`
	Status  int     `json:"status"`
}

// DashboardFigures are what the dashboard experiment measures.
type DashboardFigures struct {
	// StartS is from starting `fleet dashboard` until it printed its URL
	// (its watches synced).
	StartS float64 `json:"start_s"`
	// First is the first fetch of each page after the start, Warm the next.
	First []pageFigures `json:"first"`
	Warm  []pageFigures `json:"warm"`
	// RSSMB is the server's resident memory after the first pages, PeakRSSMB
	// its peak over the experiment.
	RSSMB     float64 `json:"rss_mb"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// CPUMsPerUpdate is the server's CPU per status update beyond its idle
	// use over as long, with one page following the events and fetching
	// itself again at each (as the page script does); IdleCPUS is that idle
	// use over Idle.
	CPUMsPerUpdate float64 `json:"cpu_ms_per_update"`
	IdleCPUS       float64 `json:"idle_cpu_s"`
	// Events is how many change events the page received, Refetches how
	// many times it fetched itself, RefetchBytes what those sent.
	Events       int   `json:"events"`
	Refetches    int   `json:"refetches"`
	RefetchBytes int64 `json:"refetch_bytes"`
}

func (d DashboardFigures) text() string {
	parts := make([]string, 0, len(d.First))
	for _, p := range d.First {
		parts = append(parts, fmt.Sprintf("%s %.0f ms %s", p.Path, 1000*p.Seconds, kb(p.Bytes)))
	}
	warm := make([]string, 0, len(d.Warm))
	for _, p := range d.Warm {
		warm = append(warm, fmt.Sprintf("%s %.0f ms", p.Path, 1000*p.Seconds))
	}
	return fmt.Sprintf("started (watches synced) in %.1f s; first pages: %s (then %s); server RSS %.0f MB (peak %.0f MB); "+
		"server CPU %.2f ms per update (idle %.2f s per %s subtracted); the page got %d change events and fetched itself %d times (%s)",
		d.StartS, strings.Join(parts, ", "), strings.Join(warm, ", "), d.RSSMB, d.PeakRSSMB, d.CPUMsPerUpdate, d.IdleCPUS,
		dashboardOpts.Idle, d.Events, d.Refetches, kb(int(d.RefetchBytes)))
}

func kb(n int) string { return fmt.Sprintf("%.1f KB", float64(n)/1024) }

// Dashboard serves the dashboard as `fleet dashboard` does (the fleet
// command, in a process of its own, so its memory and CPU are its own and
// not the simulated agents'), with the admin's kubeconfig, over the N
// clusters x B bundles that FanoutReady made Ready, and measures: the time
// and bytes of the first overview and matrix pages, its memory, and its CPU
// per status update while a page follows its events.
func (f *fleetRun) Dashboard(ctx context.Context) error {
	o := dashboardOpts
	dir, err := os.MkdirTemp("", "fleet-bench-dashboard-")
	if err != nil {
		return err
	}
	urlFile := filepath.Join(dir, "url")
	fmt.Fprintf(os.Stderr, "Starting fleet dashboard over %d clusters x %d bundles (log in %s)\n", f.n, f.b, dir)
	start := time.Now()
	p, err := framework.Start(dir, "dashboard", "fleet", "dashboard", "--kubeconfig", f.cp.Kubeconfig, "--url-file", urlFile)
	if err != nil {
		return err
	}
	defer p.Stop()
	var loginURL string
	if err := waitEvery(ctx, 50*time.Millisecond, 10*time.Minute, func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("fleet dashboard exited: %s", p.Tail(20))
		}
		b, err := os.ReadFile(urlFile)
		loginURL = strings.TrimSpace(string(b))
		return err == nil && loginURL != "", nil
	}); err != nil {
		return err
	}
	d := DashboardFigures{StartS: since(start)}
	base := strings.SplitN(loginURL, "/login", 2)[0]
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	if _, _, err := fetch(ctx, hc, loginURL, false); err != nil {
		return fmt.Errorf("logging in: %w", err)
	}
	f.mark(ctx)
	for _, path := range []string{"/", "/matrix"} {
		pf, err := timedFetch(ctx, hc, base, path)
		if err != nil {
			return err
		}
		d.First = append(d.First, pf)
	}
	for _, path := range []string{"/", "/matrix"} {
		pf, err := timedFetch(ctx, hc, base, path)
		if err != nil {
			return err
		}
		d.Warm = append(d.Warm, pf)
	}
	d.RSSMB = rssMB(p.PID(), "VmRSS:")

	// One page follows the events, as a browser's would.
	pctx, stopPage := context.WithCancel(ctx)
	defer stopPage()
	var events, refetches atomic.Int64
	var refetchBytes atomic.Int64
	pageDone := make(chan error, 1)
	go func() {
		pageDone <- followEvents(pctx, hc, base, "/matrix", &events, &refetches, &refetchBytes)
	}()
	time.Sleep(time.Second)

	idleStart := cpuOf(p.PID())
	time.Sleep(o.Idle)
	d.IdleCPUS = cpuOf(p.PID()) - idleStart

	bds, err := f.bdsToUpdate(ctx, o.Updates)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Driving %d BundleDeployment status updates at %.0f/s while a page follows the dashboard\n", len(bds), o.Rate)
	cpu := cpuOf(p.PID())
	eventsBefore, refetchesBefore, bytesBefore := events.Load(), refetches.Load(), refetchBytes.Load()
	updStart := time.Now()
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.Rate))
	for i := range bds {
		if err := modify(ctx, f.c, bds[i]); err != nil {
			tick.Stop()
			return fmt.Errorf("update %d: %w", i, err)
		}
		<-tick.C
	}
	tick.Stop()
	drive := since(updStart)
	// What the manager makes of the updates (Bundle and Cluster statuses)
	// and the page's last fetch come after.
	if err := waitSettled(ctx, &refetches, 3*time.Second, time.Minute); err != nil {
		return err
	}
	window := since(updStart)
	spent := cpuOf(p.PID()) - cpu - d.IdleCPUS*window/o.Idle.Seconds()
	d.CPUMsPerUpdate = 1000 * max(spent, 0) / float64(len(bds))
	d.Events = int(events.Load() - eventsBefore)
	d.Refetches = int(refetches.Load() - refetchesBefore)
	d.RefetchBytes = refetchBytes.Load() - bytesBefore
	d.PeakRSSMB = rssMB(p.PID(), "VmHWM:")
	stopPage()
	if d.Events == 0 || d.Refetches == 0 {
		return fmt.Errorf("the page got %d change events and fetched itself %d times during %d updates", d.Events, d.Refetches, len(bds))
	}
	if err := <-pageDone; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("the page following the events: %w", err)
	}

	// The dashboard saw every update: each made one more cluster Modified.
	_, body, err := fetch(ctx, hc, base+"/clusters?state=Modified", false)
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("%d clusters", len(bds)); !strings.Contains(body, want) {
		return fmt.Errorf("the clusters page filtered by state Modified does not say %q: %.300s", want, summaryOf(body))
	}

	r := Result{Experiment: "dashboard", Objects: len(bds), Seconds: drive, Rate: float64(len(bds)) / drive, Note: d.text()}
	r = f.measure(r, cpuSeconds(f.mgr))
	r.Dashboard = &d
	f.results = append(f.results, r)
	printJSON(r)
	return nil
}

var summaryRE = regexp.MustCompile(`<p class="summary">[^<]*</p>`)

func summaryOf(body string) string {
	if m := summaryRE.FindString(body); m != "" {
		return m
	}
	return body
}

// bdsToUpdate picks n BundleDeployments, each of another cluster.
func (f *fleetRun) bdsToUpdate(ctx context.Context, n int) ([]*fleet.BundleDeployment, error) {
	list := &fleet.BundleDeploymentList{}
	if err := f.c.List(ctx, list, client.MatchingLabels{fleet.ManagedLabel: "true"}); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []*fleet.BundleDeployment
	for i := range list.Items {
		bd := &list.Items[i]
		if seen[bd.Namespace] || !bd.Status.Ready || !bd.Status.NonModified {
			continue
		}
		seen[bd.Namespace] = true
		out = append(out, bd)
		if len(out) == n {
			break
		}
	}
	if len(out) < n {
		return nil, fmt.Errorf("only %d clusters have a Ready BundleDeployment to modify, not %d: lower -dashboard-updates", len(out), n)
	}
	return out, nil
}

// modify reports bd Modified, as an agent that found its ConfigMap changed
// would: Ready still (so the simulated agent leaves it), not NonModified.
func modify(ctx context.Context, c client.Client, bd *fleet.BundleDeployment) error {
	patch := client.MergeFrom(bd.DeepCopy())
	bd.Status.NonModified = false
	bd.Status.ModifiedStatus = []fleet.ModifiedStatus{{Kind: "ConfigMap", APIVersion: "v1", Namespace: "default", Name: bd.Name,
		Patch: `{"data":{"payload":"changed"}}`}}
	bd.Status.Display.State = string(fleet.Modified)
	return c.Status().Patch(ctx, bd, patch)
}

func fetch(ctx context.Context, hc *http.Client, url string, partial bool) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if partial {
		req.Header.Set("X-Fleet-Partial", "1")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.StatusCode, string(b), nil
}

// timedFetch GETs a page whole and times it.
func timedFetch(ctx context.Context, hc *http.Client, base, path string) (pageFigures, error) {
	start := time.Now()
	code, body, err := fetch(ctx, hc, base+path, false)
	if err != nil {
		return pageFigures{}, err
	}
	return pageFigures{Path: path, Seconds: since(start), Bytes: len(body), Status: code}, nil
}

// followEvents reads the server's change events as the page script does,
// and at each fetches the page's content again (one fetch at a time, one
// more if events came meanwhile), until ctx ends.
func followEvents(ctx context.Context, hc *http.Client, base, path string, events, refetches, bytes *atomic.Int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events", nil)
	if err != nil {
		return err
	}
	stream := &http.Client{Jar: hc.Jar} // no timeout: a stream
	resp, err := stream.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /events: %s", resp.Status)
	}
	poke := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-poke:
			}
			_, body, err := fetch(ctx, hc, base+path, true)
			if err == nil {
				refetches.Add(1)
				bytes.Add(int64(len(body)))
			}
		}
	}()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "event: change" {
			events.Add(1)
			select {
			case poke <- struct{}{}:
			default:
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return sc.Err()
}

// waitSettled waits until n has not moved for quiet (at most limit).
func waitSettled(ctx context.Context, n *atomic.Int64, quiet, limit time.Duration) error {
	last, lastChange := n.Load(), time.Now()
	return waitEvery(ctx, 100*time.Millisecond, limit, func() (bool, error) {
		if v := n.Load(); v != last {
			last, lastChange = v, time.Now()
		}
		return time.Since(lastChange) >= quiet, nil
	})
}

// rssMB reads a memory field (VmRSS:, VmHWM:) of a process, in MB.
func rssMB(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if fs := strings.Fields(line); len(fs) >= 2 && fs[0] == field {
			var kB float64
			_, _ = fmt.Sscan(fs[1], &kB)
			return kB / 1024
		}
	}
	return 0
}
