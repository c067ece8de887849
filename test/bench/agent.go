package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/deployrpc"
	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/upstream"
	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

// AgentOptions tune the agent experiment.
type AgentOptions struct {
	// Binary is a fleet-agent to measure; empty builds cmd/fleet-agent as
	// it ships (stripped, trimmed, without cgo).
	Binary string
	// Idle is the idle window; Checkin and Resync the agent's intervals
	// during it (shorter than the defaults: the window stands for a longer
	// one).
	Idle, Checkin, Resync time.Duration
	// Settle is how long the agent is left alone before its memory is read.
	Settle time.Duration
	// Cut is how long the link to the manager is cut.
	Cut time.Duration
	// HeapProfile has the agent sample its heap, so that the memory
	// figures say what holds the heap. Off, the agent runs as it ships: it
	// samples its heap only when it serves profiles, and it serves them
	// here only for its metrics.
	HeapProfile bool
}

// AgentResult is one figure of the real agent process.
type AgentResult struct {
	Experiment string  `json:"experiment"`
	Phase      string  `json:"phase"`
	Bundles    int     `json:"bundles,omitempty"`
	Seconds    float64 `json:"seconds,omitempty"`
	RSSMB      float64 `json:"rss_mb,omitempty"`
	// Go runtime figures (runtime/metrics through the agent's /metrics).
	HeapInUseMB float64 `json:"heap_inuse_mb,omitempty"`
	GoTotalMB   float64 `json:"go_total_mb,omitempty"`
	// HeapHolders: live heap by what holds it, from a heap profile.
	HeapHolders string `json:"heap_holders,omitempty"`
	// FilePages: the binary's sections resident in the process.
	FilePages  string  `json:"file_pages,omitempty"`
	CPUPercent float64 `json:"cpu_pct,omitempty"`
	// RequestsPerMin: upstream requests by verb and resource, per minute.
	RequestsPerMin string  `json:"requests_per_min,omitempty"`
	BytesUp        int64   `json:"bytes_up,omitempty"`
	BytesDown      int64   `json:"bytes_down,omitempty"`
	BytesPerHour   float64 `json:"bytes_per_hour,omitempty"`
	Lists          float64 `json:"lists,omitempty"`
	SizeMB         float64 `json:"size_mb,omitempty"`
	Note           string  `json:"note,omitempty"`
}

func printAgent(r AgentResult) {
	r.Experiment = "agent"
	printJSON(r)
}

// edgeAgent is one downstream cluster with a real fleet-agent process
// reaching the manager through a counting proxy.
type edgeAgent struct {
	o        AgentOptions
	up, down *controlplane.ControlPlane
	admin    client.Client // manager cluster
	local    client.Client // downstream cluster
	proxy    *framework.Proxy
	proc     *framework.Process
	bin      string
	debug    string
	logDir   string
	cred     *upstream.Credential
	bundles  int
	// logOffset is how far children has read the agent's log.
	logOffset int
}

// AgentExperiment measures one real agent: its image, memory with 10 and 50
// bundles (manifests and Helm charts), idle CPU and requests, bandwidth per
// change, a reconnect after a cut, and its start.
func AgentExperiment(ctx context.Context, cp *controlplane.ControlPlane, o AgentOptions) error {
	e := &edgeAgent{o: o, up: cp}
	var err error
	if e.logDir, err = os.MkdirTemp("", "fleet-bench-agent-"); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Agent experiment: logs in %s\n", e.logDir)
	if e.bin = o.Binary; e.bin == "" {
		if e.bin, err = buildAgent(e.logDir); err != nil {
			return err
		}
	}
	if err := e.image(); err != nil {
		return err
	}
	if e.down, err = controlplane.Start(controlplane.Options{Name: "bench-edge", NoCRDs: true}); err != nil {
		return err
	}
	defer func() { _ = e.down.Stop() }()
	if e.admin, err = newClient(cp.Config); err != nil {
		return err
	}
	if e.local, err = e.down.Client(kinds.Scheme()); err != nil {
		return err
	}
	mgr, err := startManager(cp)
	if err != nil {
		return err
	}
	defer mgr.Stop()
	if e.proxy, err = framework.NewProxy(cp.Config.Host); err != nil {
		return err
	}
	defer e.proxy.Close()
	if err := e.join(ctx); err != nil {
		return err
	}
	defer func() { e.proc.Stop() }()

	steps := []func(context.Context) error{
		// Registered, no bundle yet: the floor the binary itself sets.
		func(ctx context.Context) error { return e.grow(ctx, 0, false, "memory-registered") },
		func(ctx context.Context) error { return e.grow(ctx, 10, false, "memory") },
		e.idle,
		e.change,
		e.reconnect,
		func(ctx context.Context) error { return e.grow(ctx, 20, true, "memory-helm") },
		func(ctx context.Context) error { return e.grow(ctx, 50, false, "memory") },
		e.start,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return fmt.Errorf("%w (agent log: %s, manager log: %s)", err, e.proc.Log, mgr.Log)
		}
	}
	return nil
}

// buildAgent builds cmd/fleet-agent and cmd/fleet-agent-deploy as they
// ship, side by side (the agent finds its deploy binary beside itself).
func buildAgent(dir string) (string, error) {
	out := filepath.Join(dir, "fleet-agent")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", dir+string(os.PathSeparator), "./cmd/fleet-agent", "./cmd/fleet-agent-deploy")
	cmd.Dir = framework.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building fleet-agent: %v\n%s", err, b)
	}
	return out, nil
}

// image reports the size of both binaries, the resident agent and its
// deploy binary beside it, and their heaviest linked modules.
func (e *edgeAgent) image() error {
	if err := binaryImage(e.bin, "image"); err != nil {
		return err
	}
	return binaryImage(filepath.Join(filepath.Dir(e.bin), deployrpc.BinaryName), "image-deploy")
}

func binaryImage(bin, phase string) error {
	st, err := os.Stat(bin)
	if err != nil {
		return err
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		return fmt.Errorf("go version -m %s: %w", bin, err)
	}
	var mods []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "dep" {
			mods = append(mods, f[1])
		}
	}
	printAgent(AgentResult{Phase: phase, SizeMB: float64(st.Size()) / (1 << 20),
		Note: fmt.Sprintf("%s: %d modules linked; %s", filepath.Base(bin), len(mods), heavyModules(mods))})
	return nil
}

// heavyModules names the linked modules that an edge agent would rather
// not carry, or "none of ...".
func heavyModules(mods []string) string {
	var found []string
	for _, m := range mods {
		for _, heavy := range []string{"k8s.io/kubectl", "cloud.google.com", "github.com/Azure", "github.com/aws", "oras.land", "github.com/lib/pq", "github.com/ProtonMail"} {
			if strings.HasPrefix(m, heavy) {
				found = append(found, m)
			}
		}
	}
	if len(found) == 0 {
		return "no kubectl, cloud auth, OCI or SQL modules"
	}
	return "linked through Helm: " + strings.Join(found, ", ")
}

// join registers the downstream cluster as a user would (CLI-printed token
// and config applied, the agent started) with the agent's link to the
// manager through the proxy.
func (e *edgeAgent) join(ctx context.Context) error {
	tokenYAML, err := framework.Run("fleet", "install", "agent-token", "-k", e.up.Kubeconfig)
	if err != nil {
		return err
	}
	if err := framework.ApplyYAML(ctx, e.local, tokenYAML); err != nil {
		return err
	}
	boot := &corev1.Secret{}
	key := types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentBootstrapSecretName}
	if err := e.local.Get(ctx, key, boot); err != nil {
		return err
	}
	boot.Data[agentinstall.BootstrapAPIServerURLKey] = []byte(e.proxy.URL)
	if err := e.local.Update(ctx, boot); err != nil {
		return err
	}
	configYAML, err := framework.Run("fleet", "install", "agent-config", "-l", "edge=true")
	if err != nil {
		return err
	}
	if err := framework.ApplyYAML(ctx, e.local, configYAML); err != nil {
		return err
	}
	if err := e.startAgent(); err != nil {
		return err
	}
	return waitFor(ctx, 2*time.Minute, func() (bool, error) {
		cred, err := upstream.LoadStored(ctx, e.local, fleet.DefaultSystemNamespace)
		e.cred = cred
		return err == nil && cred != nil, nil
	})
}

func (e *edgeAgent) startAgent() error {
	addr, err := framework.FreeAddr()
	if err != nil {
		return err
	}
	e.debug = "http://" + addr
	// As the install runs it: the Deployment's GOMEMLIMIT.
	env := []string{"GOMEMLIMIT=" + agentinstall.GoMemLimit(agentinstall.DefaultResources())}
	if !e.o.HeapProfile {
		env = append(env, "GODEBUG=memprofilerate=0")
	}
	e.proc, err = framework.StartFile(e.logDir, fmt.Sprintf("agent-%d", time.Now().UnixNano()), e.bin, env,
		"--kubeconfig", e.down.Kubeconfig, "--debug-bind-address", addr,
		"--checkin-interval", e.o.Checkin.String(), "--resync", e.o.Resync.String())
	return err
}

// createBundle creates bundle i: a plain ConfigMap manifest, or the same
// ConfigMap templated by a Helm chart.
func (e *edgeAgent) createBundle(ctx context.Context, i int, chart bool) error {
	cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: edge-%03d, namespace: default}\ndata: {payload: %q}\n",
		i, strings.Repeat("x", 1024))
	res := []fleet.BundleResource{{Name: "cm.yaml", Content: cm}}
	if chart {
		res = []fleet.BundleResource{
			{Name: "Chart.yaml", Content: fmt.Sprintf("apiVersion: v2\nname: edge-%03d\nversion: 0.1.0\n", i)},
			{Name: "values.yaml", Content: "replicas: 1\n"},
			{Name: "templates/cm.yaml", Content: cm},
		}
	}
	return e.admin.Create(ctx, &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("edge-%03d", i), Namespace: fleet.DefaultWorkspace},
		Spec: fleet.BundleSpec{Resources: res,
			Targets: []fleet.BundleTarget{{Name: "edge", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"edge": "true"}}}}},
	})
}

// waitApplied waits until the cluster has want BundleDeployments, each
// Ready with its deploymentID applied.
func (e *edgeAgent) waitApplied(ctx context.Context, want int, timeout time.Duration) error {
	last := ""
	err := waitFor(ctx, timeout, func() (bool, error) {
		list := &fleet.BundleDeploymentList{}
		if err := e.admin.List(ctx, list, client.InNamespace(e.cred.ClusterNamespace)); err != nil {
			return false, err
		}
		ready := 0
		for i := range list.Items {
			bd := &list.Items[i]
			if bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID && summary.State(bd) == fleet.Ready {
				ready++
			}
		}
		last = fmt.Sprintf("%d of %d BundleDeployments ready (want %d)", ready, len(list.Items), want)
		return ready == want && len(list.Items) == want, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", last, err)
	}
	return nil
}

// grow adds bundles up to total, waits for them, lets the agent settle and
// reads its memory.
func (e *edgeAgent) grow(ctx context.Context, total int, chart bool, phase string) error {
	fmt.Fprintf(os.Stderr, "Agent: %d bundles (charts: %v)\n", total, chart)
	for i := e.bundles; i < total; i++ {
		if err := e.createBundle(ctx, i, chart); err != nil {
			return err
		}
	}
	e.bundles = total
	stop := e.samplePeak()
	if err := e.waitApplied(ctx, total, 5*time.Minute); err != nil {
		stop()
		return err
	}
	peak := stop()
	if c := e.children(); c.Note != "" {
		c.Phase, c.Bundles = phase+"-deploys", total
		c.Note += fmt.Sprintf("; the agent and its deploy binaries together peaked at %.1f MB RSS", peak)
		printAgent(c)
	}
	r, err := e.memory(ctx)
	if err != nil {
		return err
	}
	r.Phase, r.Bundles = phase, total
	printAgent(r)
	return nil
}

// samplePeak samples, every 50 ms until the returned function is called,
// the RSS of the agent and its children (the deploy binaries) together, as
// a container's memory would count them; the function returns the peak in
// MB.
func (e *edgeAgent) samplePeak() func() float64 {
	done := make(chan struct{})
	peak := make(chan float64, 1)
	pid := e.proc.PID()
	go func() {
		top := 0.0
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			sum := procStatus(pid)["VmRSS:"]
			// Each thread lists the children it forked.
			tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
			for _, task := range tasks {
				b, err := os.ReadFile(task)
				if err != nil {
					continue
				}
				for _, child := range strings.Fields(string(b)) {
					if n, err := strconv.Atoi(child); err == nil {
						sum += procStatus(n)["VmRSS:"]
					}
				}
			}
			top = max(top, sum)
			select {
			case <-done:
				peak <- top
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 { close(done); return <-peak }
}

// children sums up the deploy binaries the agent ran since the last call,
// from the lines it logs when one ends: how many, their peak RSS, their
// durations.
func (e *edgeAgent) children() AgentResult {
	b, err := os.ReadFile(e.proc.Log)
	if err != nil || len(b) < e.logOffset {
		return AgentResult{}
	}
	lines := strings.Split(string(b[e.logOffset:]), "\n")
	e.logOffset = len(b)
	var n int
	var peakKiB int64
	var secs []float64
	for _, line := range lines {
		if !strings.Contains(line, `"Deploy binary ended"`) {
			continue
		}
		var entry struct {
			Seconds   float64 `json:"seconds"`
			MaxRSSKiB int64   `json:"maxRSSKiB"`
		}
		if json.Unmarshal([]byte(line), &entry) != nil {
			continue
		}
		n++
		peakKiB = max(peakKiB, entry.MaxRSSKiB)
		secs = append(secs, entry.Seconds)
	}
	if n == 0 {
		return AgentResult{}
	}
	sort.Float64s(secs)
	return AgentResult{RSSMB: float64(peakKiB) / 1024, Seconds: secs[len(secs)/2],
		Note: fmt.Sprintf("%d runs of %s: peak RSS %.1f MB (the largest of them), duration median %.2f s, max %.2f s",
			n, deployrpc.BinaryName, float64(peakKiB)/1024, secs[len(secs)/2], secs[len(secs)-1])}
}

// memory lets the agent settle, then reads its RSS, the Go runtime's
// figures and a heap profile.
func (e *edgeAgent) memory(ctx context.Context) (AgentResult, error) {
	select {
	case <-ctx.Done():
		return AgentResult{}, ctx.Err()
	case <-time.After(e.o.Settle):
	}
	// RSS first: symbolizing a profile brings more of the binary's pages in.
	st := procStatus(e.proc.PID())
	pages := filePages(e.proc.PID(), e.bin)
	m, err := e.metrics(ctx)
	if err != nil {
		return AgentResult{}, err
	}
	holders := ""
	if e.o.HeapProfile {
		if holders, err = e.heapHolders(ctx); err != nil {
			return AgentResult{}, err
		}
	}
	mb := func(k string) float64 { return m[k] / (1 << 20) }
	return AgentResult{RSSMB: st["VmRSS:"], HeapInUseMB: mb("go_memory_classes_heap_objects_bytes"), GoTotalMB: mb("go_memory_classes_total_bytes"),
		HeapHolders: holders, FilePages: pages, Note: fmt.Sprintf("RSS: anonymous %.1f MB, file (the binary's pages) %.1f MB; Go: heap objects %.1f, free %.1f, released %.1f, stacks %.1f, other runtime %.1f MB",
			st["RssAnon:"], st["RssFile:"], mb("go_memory_classes_heap_objects_bytes"), mb("go_memory_classes_heap_free_bytes"),
			mb("go_memory_classes_heap_released_bytes"), mb("go_memory_classes_heap_stacks_bytes"),
			mb("go_memory_classes_total_bytes")-mb("go_memory_classes_heap_objects_bytes")-mb("go_memory_classes_heap_free_bytes")-mb("go_memory_classes_heap_released_bytes")-mb("go_memory_classes_heap_stacks_bytes"))}, nil
}

func (e *edgeAgent) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.debug+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// metrics reads the agent's /metrics: "name{labels}" to value.
func (e *edgeAgent) metrics(ctx context.Context) (map[string]float64, error) {
	b, err := e.get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}

// holders name what holds a heap sample, by a frame of its stack; the first
// that matches any frame wins.
var holders = []struct{ name, frame string }{
	// Objects decoded by a watch are held by the informer that asked.
	{"informer caches", "client-go/tools/cache"},
	{"informer caches", "apimachinery/pkg/watch.(*StreamWatcher)"},
	{"helm", "helm.sh/helm"},
	{"discovery", "client-go/discovery"},
	{"discovery", "client-go/restmapper"},
	{"discovery", "openapi"},
	{"kustomize", "kustomize"},
	{"package init", "runtime.doInit"},
}

func holderOf(s *profile.Sample) string {
	for _, h := range holders {
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				if strings.Contains(l.Function.Name, h.frame) {
					return h.name
				}
			}
		}
	}
	return "other"
}

// heapHolders sums the live heap of a profile by holder.
func (e *edgeAgent) heapHolders(ctx context.Context) (string, error) {
	b, err := e.get(ctx, "/debug/pprof/heap?gc=1")
	if err != nil {
		return "", err
	}
	p, err := profile.ParseData(b)
	if err != nil {
		return "", err
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			idx = i
		}
	}
	if idx < 0 {
		return "", fmt.Errorf("heap profile has no inuse_space")
	}
	by := map[string]int64{}
	total := int64(0)
	for _, s := range p.Sample {
		by[holderOf(s)] += s.Value[idx]
		total += s.Value[idx]
	}
	mb := func(v int64) string { return fmt.Sprintf("%.1f MB", float64(v)/(1<<20)) }
	return fmt.Sprintf("live heap %s: %s", mb(total), formatCounts(by, mb)), nil
}

func formatCounts[V int64 | float64](by map[string]V, format func(V) string) string {
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return by[keys[i]] > by[keys[j]] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+" "+format(by[k]))
	}
	return strings.Join(parts, ", ")
}

// upstreamCounts reads the agent's upstream requests by "VERB resource".
func (e *edgeAgent) upstreamCounts(ctx context.Context) (map[string]float64, error) {
	m, err := e.metrics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for k, v := range m {
		rest, ok := strings.CutPrefix(k, "fleet_agent_upstream_requests_total{")
		if !ok {
			continue
		}
		labels := map[string]string{}
		for _, kv := range labelRE.FindAllStringSubmatch(rest, -1) {
			labels[kv[1]] = kv[2]
		}
		out[labels["verb"]+" "+labels["resource"]] += v
	}
	return out, nil
}

func diffCounts(before, after map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range after {
		if n := v - before[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

// idle leaves the agent alone for the idle window and reports its CPU, its
// upstream requests per minute and the bytes on its link.
func (e *edgeAgent) idle(ctx context.Context) error {
	fmt.Fprintf(os.Stderr, "Agent: idle for %s\n", e.o.Idle)
	before, err := e.upstreamCounts(ctx)
	if err != nil {
		return err
	}
	up0, down0 := e.proxy.Bytes()
	cpu0, start := cpuOf(e.proc.PID()), time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(e.o.Idle):
	}
	s := since(start)
	cpu := cpuOf(e.proc.PID()) - cpu0
	up1, down1 := e.proxy.Bytes()
	after, err := e.upstreamCounts(ctx)
	if err != nil {
		return err
	}
	perMin := diffCounts(before, after)
	for k := range perMin {
		perMin[k] /= s / 60
	}
	printAgent(AgentResult{Phase: "idle", Bundles: e.bundles, Seconds: s, CPUPercent: 100 * cpu / s,
		RequestsPerMin: formatCounts(perMin, func(v float64) string { return fmt.Sprintf("%.2f", v) }),
		BytesUp:        up1 - up0, BytesDown: down1 - down0, BytesPerHour: float64(up1-up0+down1-down0) / s * 3600,
		Note: fmt.Sprintf("check-in every %s, resync every %s", e.o.Checkin, e.o.Resync)})
	return nil
}

// change edits one bundle and reports the bytes its rollout cost on the link.
func (e *edgeAgent) change(ctx context.Context) error {
	up0, down0 := e.proxy.Bytes()
	before, err := e.upstreamCounts(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	b := &fleet.Bundle{}
	if err := e.admin.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultWorkspace, Name: "edge-000"}, b); err != nil {
		return err
	}
	b.Spec.Resources[0].Content = strings.Replace(b.Spec.Resources[0].Content, "payload:", "changed: \"yes\", payload:", 1)
	if err := e.admin.Update(ctx, b); err != nil {
		return err
	}
	// The new deploymentID reaches the BundleDeployment first.
	if err := waitFor(ctx, time.Minute, func() (bool, error) {
		bd := &fleet.BundleDeployment{}
		if err := e.admin.Get(ctx, types.NamespacedName{Namespace: e.cred.ClusterNamespace, Name: "edge-000"}, bd); err != nil {
			return false, err
		}
		return bd.Generation > 1 && bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID && summary.State(bd) == fleet.Ready, nil
	}); err != nil {
		return fmt.Errorf("waiting for the changed bundle to be applied: %w", err)
	}
	s := since(start)
	// Its last status write may still be on the wire.
	time.Sleep(2 * time.Second)
	up1, down1 := e.proxy.Bytes()
	after, err := e.upstreamCounts(ctx)
	if err != nil {
		return err
	}
	printAgent(AgentResult{Phase: "change", Bundles: e.bundles, Seconds: s, BytesUp: up1 - up0, BytesDown: down1 - down0,
		RequestsPerMin: formatCounts(diffCounts(before, after), func(v float64) string { return fmt.Sprintf("%.0f", v) }),
		Note:           "one bundle changed: bytes on the link until it is applied and reported, requests counted (not per minute)"})
	return nil
}

// reconnect cuts the agent's link for the cut length, restores it, and
// reports what the agent fetched again.
func (e *edgeAgent) reconnect(ctx context.Context) error {
	fmt.Fprintf(os.Stderr, "Agent: link cut for %s\n", e.o.Cut)
	before, err := e.upstreamCounts(ctx)
	if err != nil {
		return err
	}
	e.proxy.Cut()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(e.o.Cut):
	}
	up0, down0 := e.proxy.Bytes()
	e.proxy.Restore()
	start := time.Now()
	// Back when a check-in went through after the cut and a watch runs.
	watches := func(m map[string]float64) float64 { return m["WATCH bundledeployments"] }
	if err := waitFor(ctx, 3*time.Minute, func() (bool, error) {
		now, err := e.upstreamCounts(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // the debug endpoint is local: no error expected, retry until waitFor times out
		}
		up, _ := e.proxy.Bytes()
		return watches(now) > watches(before) && up > up0, nil
	}); err != nil {
		return fmt.Errorf("waiting for the agent's watch to resume: %w", err)
	}
	// Let whatever it does on reconnect finish: the failed check-in is
	// retried within its backoff (at most a minute).
	time.Sleep(min(e.o.Checkin, time.Minute) + 5*time.Second)
	up1, down1 := e.proxy.Bytes()
	after, err := e.upstreamCounts(ctx)
	if err != nil {
		return err
	}
	d := diffCounts(before, after)
	lists := 0.0
	for k, v := range d {
		if strings.HasPrefix(k, "LIST ") || strings.HasPrefix(k, "WATCHLIST ") {
			lists += v
		}
	}
	printAgent(AgentResult{Phase: "reconnect", Bundles: e.bundles, Seconds: since(start), BytesUp: up1 - up0, BytesDown: down1 - down0, Lists: lists,
		RequestsPerMin: formatCounts(d, func(v float64) string { return fmt.Sprintf("%.0f", v) }),
		Note:           fmt.Sprintf("link cut for %s; requests counted during the cut and after it (not per minute)", e.o.Cut)})
	return nil
}

// start restarts the agent on a warm cluster (registered, its releases
// installed) with one new bundle waiting, and times it from process start
// to that bundle applied.
func (e *edgeAgent) start(ctx context.Context) error {
	e.proc.Stop()
	i := e.bundles
	if err := e.createBundle(ctx, i, false); err != nil {
		return err
	}
	name := fmt.Sprintf("edge-%03d", i)
	if err := waitFor(ctx, time.Minute, func() (bool, error) {
		bd := &fleet.BundleDeployment{}
		err := e.admin.Get(ctx, types.NamespacedName{Namespace: e.cred.ClusterNamespace, Name: name}, bd)
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("waiting for the manager to write BundleDeployment %s: %w", name, err)
	}
	start := time.Now()
	if err := e.startAgent(); err != nil {
		return err
	}
	e.logOffset = 0
	if err := waitFor(ctx, time.Minute, func() (bool, error) {
		bd := &fleet.BundleDeployment{}
		if err := e.admin.Get(ctx, types.NamespacedName{Namespace: e.cred.ClusterNamespace, Name: name}, bd); err != nil {
			return false, err
		}
		return bd.Status.AppliedDeploymentID != "" && bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID, nil
	}); err != nil {
		return fmt.Errorf("waiting for the restarted agent to apply %s: %w", name, err)
	}
	e.bundles++
	if c := e.children(); c.Note != "" {
		c.Phase, c.Bundles = "start-deploys", e.bundles
		printAgent(c)
	}
	printAgent(AgentResult{Phase: "start", Bundles: e.bundles, Seconds: since(start),
		Note: "process start to the first new BundleDeployment applied, registered cluster with its releases installed"})
	return nil
}

// procStatus reads the kB figures of /proc/PID/status, in MB.
func procStatus(pid int) map[string]float64 {
	out := map[string]float64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "kB" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			out[f[0]] = kb / 1024
		}
	}
	return out
}
