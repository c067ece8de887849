package main

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notificationv1 "github.com/gitfleet/fleet/api/notification/v1alpha1"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/notify"
)

// notifyRepo is the GitRepo the notify experiment rolls out.
const notifyRepo = "bench-app"

// notifyRounds is how many measured rollouts the notify experiment makes
// each way (without, then with a Notification, alternately), so that the
// difference is read against the spread of the same rollout
// (-notify-rounds).
var notifyRounds = 2

// notifyReceiver is a loopback webhook that checks each message's
// signature and counts the messages by event and revision.
type notifyReceiver struct {
	*httptest.Server
	key []byte
	mu  sync.Mutex
	got map[string]int
	bad int
}

func newNotifyReceiver(key []byte) *notifyReceiver {
	rv := &notifyReceiver{key: key, got: map[string]int{}}
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var m notify.Message
		rv.mu.Lock()
		defer rv.mu.Unlock()
		if !hmac.Equal([]byte(req.Header.Get(notify.SignatureHeader)), []byte(notify.Sign(rv.key, body))) || json.Unmarshal(body, &m) != nil {
			rv.bad++
			http.Error(w, "bad message", http.StatusBadRequest)
			return
		}
		rv.got[m.Event+"@"+m.Revision]++
		w.WriteHeader(http.StatusNoContent)
	}))
	return rv
}

func (rv *notifyReceiver) count(event, revision string) int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.got[event+"@"+revision]
}

func (rv *notifyReceiver) total() (ok, bad int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	for _, n := range rv.got {
		ok += n
	}
	return ok, rv.bad
}

// notifyFiles is the repository at one version: B bundle directories of one
// 10 KB ConfigMap each.
func notifyFiles(b int, version string) map[string]string {
	payload := strings.Repeat("x", 10*1024)
	files := map[string]string{}
	for i := range b {
		dir := fmt.Sprintf("b-%03d", i)
		files[dir+"/fleet.yaml"] = "defaultNamespace: bench-app\n"
		files[dir+"/cm.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {version: %q, payload: %s}\n", dir, version, payload)
	}
	return files
}

// Notify measures what a Notification adds to the manager's CPU: a GitRepo
// of B bundles, served by a git server on loopback, is rolled out to every
// agent's cluster at one commit after another, alternately without and
// with a webhook Notification selecting every GitRepo of the namespace
// (its receiver on loopback too). Each rollout is timed from the commit to
// every Bundle counting all N clusters ready with it (and, with the
// Notification, its Succeeded message received), then 2 s more.
func (f *fleetRun) Notify(ctx context.Context) error {
	root, err := os.MkdirTemp("", "fleet-bench-git-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(root) }()
	repo, err := gittest.NewRepo(filepath.Join(root, notifyRepo), "main")
	if err != nil {
		return err
	}
	git := gittest.NewServer(root)
	defer git.Close()
	key := []byte("bench-hmac-key")
	rv := newNotifyReceiver(key)
	defer rv.Close()

	version := 0
	commit := func() (string, error) {
		version++
		return repo.Commit(fmt.Sprintf("v%d", version), notifyFiles(f.b, strconv.Itoa(version)))
	}
	// The first commit creates the BundleDeployments: not measured.
	sha, err := commit()
	if err != nil {
		return err
	}
	gr := &fleet.GitRepo{
		ObjectMeta: metav1.ObjectMeta{Name: notifyRepo, Namespace: fleet.DefaultWorkspace},
		Spec: fleet.GitRepoSpec{Repo: git.RepoURL(notifyRepo), Branch: "main",
			PollingInterval: &metav1.Duration{Duration: 2 * time.Second},
			Targets: []fleet.GitTarget{{Name: "all",
				ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench": "true"}}}}},
	}
	if err := f.c.Create(ctx, gr); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Rolling out %s (%d bundles to %d clusters), not measured\n", sha[:12], f.b, f.n)
	if err := f.waitRolledOut(ctx, sha); err != nil {
		return err
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bench-hook", Namespace: fleet.DefaultWorkspace},
		Data: map[string][]byte{notificationv1.SecretKeyAddress: []byte(rv.URL), notificationv1.SecretKeyHMAC: key}}
	if err := f.c.Create(ctx, secret); err != nil {
		return err
	}
	newNotification := func() *notificationv1.Notification {
		return &notificationv1.Notification{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: fleet.DefaultWorkspace},
			Spec: notificationv1.NotificationSpec{Destination: notificationv1.Destination{Type: notificationv1.DestinationWebhook,
				SecretRef: &notificationv1.LocalObjectReference{Name: secret.Name}}}}
	}

	var off, on []Result
	for round := range 2 * notifyRounds {
		with := round%2 == 1
		if with {
			if err := f.c.Create(ctx, newNotification()); err != nil {
				return err
			}
		} else if err := f.c.Delete(ctx, newNotification()); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		time.Sleep(3 * time.Second) // the Notification settles (recorded, nothing to send)
		f.mark(ctx)
		cpu := cpuSeconds(f.mgr)
		reconcileBefore := f.mgr.notificationReconcileSeconds()
		prof := startManagerProfile(ctx)
		start := time.Now()
		if sha, err = commit(); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "Rolling out %s, Notification: %v\n", sha[:12], with)
		if err := f.waitRolledOut(ctx, sha); err != nil {
			return err
		}
		if with {
			if err := waitFor(ctx, time.Minute, func() (bool, error) { return rv.count("Succeeded", sha) > 0, nil }); err != nil {
				return fmt.Errorf("no Succeeded message about %s: %w", sha, err)
			}
		}
		time.Sleep(2 * time.Second)
		s := since(start)
		profiled, notifying := prof.share()
		exp := "notify-off"
		if with {
			exp = "notify-on"
		}
		r := f.measure(Result{Experiment: exp, Objects: f.n * f.b, Seconds: s, Rate: float64(f.n*f.b) / s}, cpu)
		r.Note = fmt.Sprintf("manager profile: %.2f CPU s, of it %.3f s (%.2f%%) in the notification controller and senders",
			profiled, notifying, 100*notifying/max(profiled, 1e-9))
		if with {
			r.Note += fmt.Sprintf("; %d Started, %d Succeeded; notification reconciles %.3f s (wall, sending included)",
				rv.count("Started", sha), rv.count("Succeeded", sha), f.mgr.notificationReconcileSeconds()-reconcileBefore)
			r.NotifyProfileShare = notifying / max(profiled, 1e-9)
			on = append(on, r)
		} else {
			off = append(off, r)
		}
		f.results = append(f.results, r)
		printJSON(r)
	}
	ok, bad := rv.total()
	sum := func(rs []Result) float64 {
		t := 0.0
		for _, r := range rs {
			t += r.ManagerCPUS
		}
		return t / float64(len(rs))
	}
	offCPU, onCPU := sum(off), sum(on)
	share := 0.0
	for _, r := range on {
		share += r.NotifyProfileShare / float64(len(on))
	}
	r := Result{Experiment: "notify", Clusters: f.n, Bundles: f.b, ManagerCPUS: onCPU - offCPU, NotifyProfileShare: share,
		Note: fmt.Sprintf("manager CPU per rollout: %.2f s without, %.2f s with a Notification (%+.1f%%); in the profile, the notification code's share with it: %.2f%%; %d messages, %d refused",
			offCPU, onCPU, 100*(onCPU-offCPU)/offCPU, 100*share, ok, bad)}
	f.results = append(f.results, r)
	printJSON(r)
	return f.c.Delete(ctx, gr)
}

// managerProfiler reads the manager's CPU profile in consecutive pieces of
// profileChunk seconds until stopped (the manager serves its profiles with
// -pprof, which the notify experiment turns on).
type managerProfiler struct {
	stop   chan struct{}
	done   chan struct{}
	chunks []*profile.Profile
}

func startManagerProfile(ctx context.Context) *managerProfiler {
	p := &managerProfiler{stop: make(chan struct{}), done: make(chan struct{})}
	if pprofAddr == "" {
		close(p.done)
		return p
	}
	hc := &http.Client{Timeout: 4 * profileChunk * time.Second}
	go func() {
		defer close(p.done)
		for {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, profileChunk), nil)
			if err != nil {
				return
			}
			if resp, err := hc.Do(req); err == nil {
				if prof, err := profile.Parse(resp.Body); err == nil {
					p.chunks = append(p.chunks, prof)
				}
				_ = resp.Body.Close()
			}
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				return
			default:
			}
		}
	}()
	return p
}

// save stops the profile and writes the merged chunks to a file named
// after name in the temporary directory, whose path it returns ("" without
// -pprof), for go tool pprof.
func (p *managerProfiler) save(name string) (string, error) {
	close(p.stop)
	<-p.done
	if len(p.chunks) == 0 {
		return "", nil
	}
	merged, err := profile.Merge(p.chunks)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "fleet-bench-"+name+"-*.pprof")
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	if err := merged.Write(f); err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

// notifyMarkers are the packages whose work a Notification adds: the
// reconciler (its event mapping included) and the senders.
var notifyMarkers = []string{"gitfleet/fleet/controllers/notification.", "gitfleet/fleet/internal/notify."}

// share stops the profile and returns the CPU seconds it holds and those
// of stacks through notifyMarkers.
func (p *managerProfiler) share() (total, notifying float64) {
	close(p.stop)
	<-p.done
	for _, c := range p.chunks {
		i := len(c.SampleType) - 1 // cpu nanoseconds
		for _, s := range c.Sample {
			v := float64(s.Value[i]) / 1e9
			total += v
			if stackHolds(s, notifyMarkers) {
				notifying += v
			}
		}
	}
	return total, notifying
}

// waitRolledOut waits until every Bundle of the notify GitRepo shows sha
// with all N clusters ready (listing them every 250 ms).
func (f *fleetRun) waitRolledOut(ctx context.Context, sha string) error {
	return waitEvery(ctx, 250*time.Millisecond, 15*time.Minute, func() (bool, error) {
		list := &fleet.BundleList{}
		if err := f.c.List(ctx, list, client.InNamespace(fleet.DefaultWorkspace), client.MatchingLabels{fleet.RepoLabel: notifyRepo}); err != nil {
			return false, err
		}
		if len(list.Items) != f.b {
			return false, nil
		}
		for _, b := range list.Items {
			s := b.Status.Summary
			if b.Labels[fleet.CommitLabel] != sha || b.Status.ObservedGeneration != b.Generation || s.Ready < f.n ||
				s.NotReady+s.WaitApplied+s.ErrApplied+s.OutOfSync+s.Modified+s.Pending > 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

// notificationReconcileSeconds reads the time the notification controller
// spent reconciling so far (controller-runtime's
// controller_runtime_reconcile_time_seconds_sum), 0 when it cannot be read.
func (m *manager) notificationReconcileSeconds() float64 {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(m.metricsURL)
	if err != nil {
		return 0
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, `controller_runtime_reconcile_time_seconds_sum{controller="notification"} `); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}
