package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/controlplane"
)

// Monorepo measures what many GitRepos on one repository cost next to one:
// a repository of apps directories is read once by one GitRepo (every
// directory a bundle) and once by one GitRepo per directory, each with
// credentials of its own on one loopback git server (so each side's requests
// are counted apart). For each, commits changing every app are made one
// after the other, each waited for until every GitRepo reports it; the git
// server's requests and bytes and the manager's CPU per commit are compared:
// the many GitRepos share one ls-remote per polling interval and one fetch
// per commit (internal/gitshare), so the goal is within 1.5x of the one.
func Monorepo(ctx context.Context, cp *controlplane.ControlPlane, apps, commits int) ([]Result, error) {
	c, err := newClient(cp.Config)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "fleet-bench-monorepo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	repo, err := gittest.NewRepo(filepath.Join(root, "mono"), "main")
	if err != nil {
		return nil, err
	}
	appFiles := func(value int) map[string]string {
		files := map[string]string{}
		for i := range apps {
			app := fmt.Sprintf("app%03d", i)
			files["apps/"+app+"/fleet.yaml"] = "defaultNamespace: monorepo\n"
			files["apps/"+app+"/cm.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  value: \"%d\"\n", app, value)
		}
		return files
	}
	if _, err := repo.Commit("apps", appFiles(0)); err != nil {
		return nil, err
	}
	srv := gittest.NewServer(root)
	defer srv.Close()

	// The git server is on loopback, which the manager refuses by default.
	mgr, err := startManager(cp, "--egress-allow-cidrs", "127.0.0.0/8")
	if err != nil {
		return nil, err
	}
	defer mgr.Stop()
	// The manager's start (the local cluster's import, the token) is not
	// the first side's: both sides begin with the manager idle.
	waitManagerIdle(ctx, mgr)

	interval := 5 * time.Second
	value := 0
	run := func(name string, n int) (Result, error) {
		ns := "bench-" + name
		srv.AddUser(name, name+"-pass")
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return Result{}, err
		}
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{"username": []byte(name), "password": []byte(name + "-pass")}}); err != nil {
			return Result{}, err
		}
		for i := range n {
			spec := fleet.GitRepoSpec{Repo: srv.RepoURL("mono"), Branch: "main", ClientSecretName: "git", PollingInterval: &metav1.Duration{Duration: interval}}
			if n > 1 {
				spec.Paths = []string{fmt.Sprintf("apps/app%03d", i)}
			}
			if err := c.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%03d", i), Namespace: ns}, Spec: spec}); err != nil {
				return Result{}, err
			}
		}
		head, err := repo.Commit("touch", appFiles(value))
		if err != nil {
			return Result{}, err
		}
		if err := waitCommit(ctx, c, ns, n, head); err != nil {
			return Result{}, fmt.Errorf("%s: the first commit: %w (manager log: %s)", name, err, mgr.Log)
		}
		bundles := &fleet.BundleList{}
		if err := c.List(ctx, bundles, client.InNamespace(ns)); err != nil {
			return Result{}, err
		}
		fmt.Fprintf(os.Stderr, "%s: %d GitRepos synced, %d bundles; now %d commits\n", name, n, len(bundles.Items), commits)
		req0, _ := apiRequests(ctx, cp.Config)
		git0, cpu0, rec0, start := srv.CountsOf(name), cpuSeconds(mgr), mgr.reconciles(), time.Now()
		prof := startManagerProfile(ctx)
		for range commits {
			value++
			head, err := repo.Commit(fmt.Sprintf("value %d", value), appFiles(value))
			if err != nil {
				return Result{}, err
			}
			if err := waitCommit(ctx, c, ns, n, head); err != nil {
				return Result{}, fmt.Errorf("%s: commit %d: %w (manager log: %s)", name, value, err, mgr.Log)
			}
		}
		git1, cpu1, rec1, s := srv.CountsOf(name), cpuSeconds(mgr), mgr.reconciles(), since(start)
		if req1, err := apiRequests(ctx, cp.Config); err == nil && req0 != nil {
			// The writes of every writer (the manager's, and none other
			// here): what each commit costs the API server.
			fmt.Fprintf(os.Stderr, "%s: over %d commits, %s\n", name, commits, writesSince(req0, req1))
		}
		if path, err := prof.save("monorepo-" + name); err != nil {
			fmt.Fprintf(os.Stderr, "%s: the manager's CPU profile: %v\n", name, err)
		} else if path != "" {
			fmt.Fprintf(os.Stderr, "%s: the manager's CPU profile over the commits: %s\n", name, path)
		}
		per := func(a, b int64) float64 { return float64(b-a) / float64(commits) }
		r := Result{Experiment: "monorepo-" + name, Objects: len(bundles.Items), Seconds: s, Rate: float64(commits) / s,
			ManagerCPUS: cpu1 - cpu0, ManagerRSSMB: peakRSSMB(mgr), Load1: loadAverage(),
			GitRepos: n, GitListsPerCommit: per(git0.Lists-git0.Fetches, git1.Lists-git1.Fetches),
			GitFetchesPerCommit: per(git0.Fetches, git1.Fetches), GitBytesPerCommit: per(git0.Bytes, git1.Bytes)}
		r.ManagerCPUMsPerCommit = 1000 * r.ManagerCPUS / float64(commits)
		r.ReconcilesPerCommit = map[string]float64{}
		for k, v := range rec1 {
			if d := v - rec0[k]; d > 0 {
				r.ReconcilesPerCommit[k] = d / float64(commits)
			}
		}
		if err := c.DeleteAllOf(ctx, &fleet.GitRepo{}, client.InNamespace(ns)); err != nil {
			return r, err
		}
		if err := waitFor(ctx, 2*time.Minute, func() (bool, error) {
			list := &fleet.BundleList{}
			err := c.List(ctx, list, client.InNamespace(ns))
			return err == nil && len(list.Items) == 0, err
		}); err != nil {
			return r, err
		}
		// The Contents of this side's commits are collected a grace
		// period after their last use: the next side starts once they
		// are, so that it does not pay for this one's.
		return r, waitFor(ctx, 4*time.Minute, func() (bool, error) {
			list := &fleet.ContentList{}
			err := c.List(ctx, list)
			return err == nil && len(list.Items) == 0, err
		})
	}
	one, err := run("one", 1)
	if err != nil {
		return nil, err
	}
	printJSON(one)
	many, err := run("many", apps)
	if err != nil {
		return []Result{one}, err
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	many.Note = fmt.Sprintf("over one GitRepo: git requests %.2fx, bytes %.2fx, manager CPU %.2fx (goal within 1.5x)",
		ratio(many.GitListsPerCommit+2*many.GitFetchesPerCommit, one.GitListsPerCommit+2*one.GitFetchesPerCommit),
		ratio(many.GitBytesPerCommit, one.GitBytesPerCommit), ratio(many.ManagerCPUMsPerCommit, one.ManagerCPUMsPerCommit))
	many.GitRatio = ratio(many.GitBytesPerCommit, one.GitBytesPerCommit)
	many.CPURatio = ratio(many.ManagerCPUMsPerCommit, one.ManagerCPUMsPerCommit)
	printJSON(many)
	return []Result{one, many}, nil
}

// waitCommit waits until the n GitRepos of ns report commit.
func waitCommit(ctx context.Context, c client.Client, ns string, n int, commit string) error {
	return waitEvery(ctx, 100*time.Millisecond, 3*time.Minute, func() (bool, error) {
		list := &fleet.GitRepoList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		done := 0
		for _, gr := range list.Items {
			if gr.Status.Commit == commit {
				done++
			}
		}
		return done == n, nil
	})
}

// reconciles reads controller_runtime_reconcile_total from the manager's
// metrics endpoint: the reconciles so far by controller, every result
// summed (empty when it cannot be read).
func (m *manager) reconciles() map[string]float64 {
	out := map[string]float64{}
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(m.metricsURL)
	if err != nil {
		return out
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, `controller_runtime_reconcile_total{controller="`)
		if !ok {
			continue
		}
		name, rest, ok := strings.Cut(rest, `"`)
		_, value, ok2 := strings.Cut(rest, "} ")
		if !ok || !ok2 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err == nil {
			out[name] += v
		}
	}
	return out
}

// waitManagerIdle waits, up to a minute, until the manager spends less than
// a twentieth of a core over 3 s.
func waitManagerIdle(ctx context.Context, mgr *manager) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		before := cpuSeconds(mgr)
		select {
		case <-ctx.Done():
			return
		case <-time.After(3 * time.Second):
		}
		if cpuSeconds(mgr)-before < 0.15 {
			return
		}
	}
}
