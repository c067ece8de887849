package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/bundledeployment"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/simagent"
)

// The commit experiment: what a user feels when a commit goes to the fleet.
// A GitRepo on a loopback git server holds B bundle directories targeting
// every simulated cluster; once its first rollout is Ready, a commit
// changes every bundle, the signed push webhook is delivered to the
// manager, and the bench times until every cluster reports the new commit
// Ready. Its floor (commit-floor) is the BundleDeployment updates and the
// agents' status writes alone, made directly on the same API server.

// commitRepo is the GitRepo of the commit experiment.
const commitRepo = "bench-commit"

// commitFiles are the B bundle directories of the commit experiment's
// repository at version v: one ConfigMap of 10 KB each.
func commitFiles(b int, v int) map[string]string {
	payload := strings.Repeat("x", 10*1024)
	files := map[string]string{}
	for i := range b {
		files[fmt.Sprintf("bundle-%02d/cm.yaml", i)] = fmt.Sprintf(
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: commit-%d}\ndata: {version: \"%d\", payload: %s}\n", i, v, payload)
	}
	return files
}

// bdTracker follows the commit experiment's BundleDeployments as their
// agents see and report them: their deploymentID and whether their agent
// reported it Ready, and, once armed at a push, when each was first seen
// with a new deploymentID (by its agent: a little after it was written)
// and when its Ready status on it was written.
type bdTracker struct {
	mu    sync.Mutex
	state map[string]bdState
	// Set by arm: the deploymentIDs before the push, and when it was sent.
	armed                 bool
	old                   map[string]string
	start                 time.Time
	firstWrite, lastWrite time.Time
	written               map[string]bool
	ready                 map[string]time.Duration
	// bundleWrites are when the GitRepo's Bundles got a new generation
	// after the push.
	bundleWrites []time.Time
}

type bdState struct {
	id    string
	ready bool
}

func newBDTracker() *bdTracker { return &bdTracker{state: map[string]bdState{}} }

func (t *bdTracker) observe(o any) {
	bd, ok := o.(*fleet.BundleDeployment)
	if !ok {
		return
	}
	now := time.Now()
	key := bd.Namespace + "/" + bd.Name
	id := bd.Spec.DeploymentID
	ready := id != "" && bd.Status.Ready && bd.Status.AppliedDeploymentID == id
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state[key] = bdState{id: id, ready: ready}
	if !t.armed || id == t.old[key] {
		return
	}
	if !t.written[key] {
		t.written[key] = true
		if t.firstWrite.IsZero() {
			t.firstWrite = now
		}
		t.lastWrite = now
	}
	if _, seen := t.ready[key]; ready && !seen {
		t.ready[key] = now.Sub(t.start)
	}
}

// readyCount is how many BundleDeployments are Ready on their
// deploymentID (before arm) or on a new one (after).
func (t *bdTracker) readyCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.armed {
		return len(t.ready)
	}
	n := 0
	for _, s := range t.state {
		if s.ready {
			n++
		}
	}
	return n
}

// arm notes the deploymentIDs as they are and starts timing from start.
func (t *bdTracker) arm(start time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.old = make(map[string]string, len(t.state))
	for k, s := range t.state {
		t.old[k] = s.id
	}
	t.armed, t.start = true, start
	t.written, t.ready = map[string]bool{}, map[string]time.Duration{}
}

// clusterTimes is, for each cluster namespace, when the last of its
// BundleDeployments was Ready on the new deploymentID, sorted.
func (t *bdTracker) clusterTimes() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	per := map[string]time.Duration{}
	for key, d := range t.ready {
		ns := key[:strings.IndexByte(key, '/')]
		per[ns] = max(per[ns], d)
	}
	out := make([]time.Duration, 0, len(per))
	for _, d := range per {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// track feeds t, until ctx ends, with the BundleDeployments made from the
// GitRepo named repo as f's agents see them and as their Ready status
// writes land (simagent.Agent.SetObserver), and watches that GitRepo's
// Bundles for their new generations. The bench keeps no watch of its own on
// the BundleDeployments: one more watcher of every write would be a cost of
// the measurement the API server, and the two cores, pay during the rollout.
// The caller stops the agents' reports (observeAgents(nil)) before it tracks
// anything else.
func (f *fleetRun) track(ctx context.Context, repo string, t *bdTracker) error {
	f.observeAgents(func(bd *fleet.BundleDeployment) {
		if bd.Labels[fleet.RepoLabel] == repo {
			t.observe(bd)
		}
	})
	sel := labels.SelectorFromSet(labels.Set{fleet.RepoLabel: repo})
	c, err := cache.New(f.cp.Config, cache.Options{Scheme: controllers.Scheme(),
		DefaultLabelSelector: sel, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return err
	}
	bundles, err := c.GetInformer(ctx, &fleet.Bundle{})
	if err != nil {
		return err
	}
	if _, err := bundles.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, o any) {
			if old.(*fleet.Bundle).Generation == o.(*fleet.Bundle).Generation {
				return
			}
			t.mu.Lock()
			if t.armed {
				t.bundleWrites = append(t.bundleWrites, time.Now())
			}
			t.mu.Unlock()
		},
	}); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("the Bundle watch did not sync")
	}
	return nil
}

// pushWebhook delivers a GitHub push of commit to the manager's webhook,
// signed with its secret, and returns how many GitRepos it triggered.
func pushWebhook(ctx context.Context, url, secret, repoURL, commit string) (int, error) {
	body, err := json.Marshal(map[string]any{"ref": "refs/heads/main", "after": commit,
		"repository": map[string]any{"clone_url": repoURL, "default_branch": "main"}})
	if err != nil {
		return 0, err
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	var r struct {
		Triggered int `json:"triggered"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &r) != nil {
		return 0, fmt.Errorf("the webhook answered %s: %s", resp.Status, data)
	}
	return r.Triggered, nil
}

// Commit runs the commit experiment (see above) with f's agents: floor is
// the commit-floor result measured on the same API server (zero: not
// measured).
func (f *fleetRun) Commit(ctx context.Context, floor Result) error {
	root, err := os.MkdirTemp("", "fleet-bench-git-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(root) }()
	repo, err := gittest.NewRepo(filepath.Join(root, "fleet"), "main")
	if err != nil {
		return err
	}
	if _, err := repo.Commit("first", commitFiles(f.b, 1)); err != nil {
		return err
	}
	srv := gittest.NewServer(root)
	defer srv.Close()
	repoURL := srv.RepoURL("fleet")

	tr := newBDTracker()
	trackCtx, stopTracking := context.WithCancel(ctx)
	defer stopTracking()
	defer f.observeAgents(nil)
	if err := f.track(trackCtx, commitRepo, tr); err != nil {
		return err
	}
	want := f.n * f.b
	paths := make([]string, f.b)
	for i := range paths {
		paths[i] = fmt.Sprintf("bundle-%02d", i)
	}
	gr := &fleet.GitRepo{
		ObjectMeta: metav1.ObjectMeta{Name: commitRepo, Namespace: fleet.DefaultWorkspace},
		Spec: fleet.GitRepoSpec{Repo: repoURL, Branch: "main", Paths: paths,
			// Only the webhook brings the next commit.
			PollingInterval: &metav1.Duration{Duration: time.Hour},
			Targets: []fleet.GitTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"bench": "true"}}}}},
	}
	fmt.Fprintf(os.Stderr, "Commit: a GitRepo of %d bundles for %d clusters, first rollout\n", f.b, f.n)
	f.mark(ctx)
	cpu := cpuSeconds(f.mgr)
	start := time.Now()
	if err := f.c.Create(ctx, gr); err != nil {
		return err
	}
	if err := waitEvery(ctx, 100*time.Millisecond, 30*time.Minute, func() (bool, error) { return tr.readyCount() >= want, nil }); err != nil {
		return fmt.Errorf("first rollout of the GitRepo: %d of %d BundleDeployments Ready: %w", tr.readyCount(), want, err)
	}
	first := since(start)
	r := f.measure(Result{Experiment: "commit-rollout", Objects: want, Seconds: first, Rate: float64(want) / first,
		Note: "a GitRepo created: until its B bundles are Ready on every cluster"}, cpu)
	if f.floor > 0 {
		r.FloorRatio = r.Rate / f.floor
		r.Note += fmt.Sprintf("; %.0f%% of cr-floor", 100*r.FloorRatio)
	}
	r.APIServerCPUMsPerBD = 1000 * r.APIServerCPUS / float64(want)
	f.results = append(f.results, r)
	printJSON(r)
	waitWritesSettle(ctx, f.cp, 3*time.Second, time.Minute)

	// The push: a commit changing every bundle, then the webhook.
	sha, err := repo.Commit("second", commitFiles(f.b, 2))
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Commit: pushing %s and delivering the webhook\n", sha[:8])
	f.markProfiled(ctx)
	cpu = cpuSeconds(f.mgr)
	mprof := startManagerProfile(ctx)
	start = time.Now()
	tr.arm(start)
	triggered, err := pushWebhook(ctx, f.mgr.webhookURL, f.mgr.webhookSecret, repoURL, sha)
	if err != nil || triggered != 1 {
		f.finishProfiles(nil)
		return fmt.Errorf("delivering the webhook: %d GitRepos triggered, %v", triggered, err)
	}
	answered := since(start)
	if err := waitEvery(ctx, 100*time.Millisecond, 30*time.Minute, func() (bool, error) { return tr.readyCount() >= want, nil }); err != nil {
		f.finishProfiles(nil)
		return fmt.Errorf("after the push: %d of %d BundleDeployments Ready on the new commit: %w", tr.readyCount(), want, err)
	}
	whole := since(start)
	times := tr.clusterTimes()
	tr.mu.Lock()
	firstBD, lastBD := tr.firstWrite.Sub(start).Seconds(), tr.lastWrite.Sub(start).Seconds()
	bundlesWritten := "no Bundle written"
	if w := tr.bundleWrites; len(w) > 0 {
		bundlesWritten = fmt.Sprintf("%d Bundle writes from %.3f s to %.3f s", len(w), w[0].Sub(start).Seconds(), w[len(w)-1].Sub(start).Seconds())
	}
	tr.mu.Unlock()
	r = Result{Experiment: "commit", Objects: want, Seconds: whole, Rate: float64(want) / whole,
		P50: times[len(times)/2].Seconds(), P99: times[len(times)*99/100].Seconds(),
		WebhookToFirstBDS: firstBD, WebhookToLastBDS: lastBD,
		Note: fmt.Sprintf("push webhook answered in %.3f s; %s; first BundleDeployment written (seen by its agent) %.3f s after the webhook was sent (goal < 1 s), last %.1f s; p50/p99 per cluster (all its %d bundles Ready)",
			answered, bundlesWritten, firstBD, lastBD, f.b)}
	r = f.measure(r, cpu)
	f.finishProfiles(&r)
	if path, err := mprof.save("commit"); err != nil {
		fmt.Fprintf(os.Stderr, "Commit: the manager's CPU profile: %v\n", err)
	} else if path != "" {
		fmt.Fprintf(os.Stderr, "Commit: the manager's CPU profile over the rollout of the push: %s\n", path)
	}
	r.APIServerCPUMsPerBD = 1000 * r.APIServerCPUS / float64(want)
	if floor.Rate > 0 {
		// The floor's time for as many BundleDeployments as the commit moved.
		r.FloorSeconds = float64(want) / floor.Rate
		r.FloorRatio = r.Rate / floor.Rate
		verdict := "above"
		if whole <= 1.3*r.FloorSeconds {
			verdict = "within"
		}
		r.Note += fmt.Sprintf("; whole %.1f s is %.2fx the floor's %.1f s for %d updates and status writes (commit-floor): %s the goal of 1.3x",
			whole, whole/r.FloorSeconds, r.FloorSeconds, want, verdict)
	}
	cpuNote(&r, floor)
	f.results = append(f.results, r)
	printJSON(r)
	return nil
}

// CommitFloor measures the least a commit's rollout costs the API server:
// count BundleDeployments that exist and are Ready (made first, not timed)
// each get a new deploymentID as the manager writes it (a merge patch of
// spec and labels) and then their Ready status on it as the agent writes
// it (bundledeployment.StatusOnly), by clients clients, with no manager,
// no agents and no watches.
func CommitFloor(ctx context.Context, cp *controlplane.ControlPlane, clients, count int, crCeiling float64) (Result, error) {
	c, err := newClient(cp.Config)
	if err != nil {
		return Result{}, err
	}
	ns := "bench-commit-floor"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return Result{}, err
	}
	id1 := "s-4aa1b66c7f4661cc9d4e95a29f4164d8e9528ebb61971567f4cd3b7-cb704:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
	id2 := "s-9c0f3e1d2b8a4f6e7d5c3b1a09f8e7d6c5b4a39281706f5e4d3c2b1-a1b2c:0d3e2f1a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e"
	content := func(id string) string { return id[:strings.IndexByte(id, ':')] }
	bds := make([]*fleet.BundleDeployment, count)
	fmt.Fprintf(os.Stderr, "commit-floor: making %d Ready BundleDeployments (not timed)\n", count)
	if err := parallel(clients, count, func(i int) error {
		bd := &fleet.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bd-%d", i), Namespace: ns,
				Labels: map[string]string{
					fleet.BundleNameLabel: fmt.Sprintf("b-%03d", i%1000), fleet.BundleNamespaceLabel: fleet.DefaultWorkspace,
					fleet.ClusterLabel: fmt.Sprintf("c-%05d", i), fleet.ClusterNamespaceLabel: fleet.DefaultWorkspace,
					fleet.ContentNameLabel: content(id1), fleet.ManagedLabel: "true"}},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: id1, StagedDeploymentID: id1},
		}
		if err := c.Create(ctx, bd, client.FieldOwner("fleet-manager")); err != nil {
			return err
		}
		simagent.ReadyStatus(bd)
		body, err := bundledeployment.StatusOnly(bd)
		if err != nil {
			return err
		}
		if err := c.Status().Update(ctx, body, client.FieldOwner("fleet-agent")); err != nil {
			return err
		}
		bds[i] = bd
		return nil
	}); err != nil {
		return Result{}, err
	}
	prof := startAPIProfile(ctx, cp.Config)
	before := takeUsage(ctx, cp)
	start := time.Now()
	err = parallel(clients, count, func(i int) error {
		old := bds[i]
		base := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: ns, Labels: old.Labels}, Spec: old.Spec}
		bd := base.DeepCopy()
		bd.Labels[fleet.ContentNameLabel] = content(id2)
		bd.Spec.DeploymentID, bd.Spec.StagedDeploymentID = id2, id2
		if err := c.Patch(ctx, bd, client.MergeFrom(base), client.FieldOwner("fleet-manager")); err != nil {
			return err
		}
		return writeReady(ctx, c, bd)
	})
	return floorResult(ctx, cp, c, ns, "commit-floor",
		"Ready BundleDeployments given a new deploymentID and their Ready status on it, written directly: the least a commit's rollout costs",
		count, start, before, prof, crCeiling, err)
}
