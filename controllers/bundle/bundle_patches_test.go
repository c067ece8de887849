package bundle_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/controllers/bundle"
	"github.com/gitfleet/fleet/internal/enqueue"
)

// A commit costs one BundleDeployment patch per cluster, even when the
// manager's watch runs behind its own writes, as it does on a loaded API
// server: a pass that runs before the watch delivers the version the last
// pass wrote must not take the older spec in its cache for a change still
// to make. A second bundle controller, serving its own shard, watches
// BundleDeployments through a link that delivers every watch event 2 s
// late and counts the BundleDeployment patches the API server receives
// from it.
func TestCommitPatchesEachDeploymentOnceWhileTheWatchLags(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const (
		n     = 20
		shard = "lagged"
		lag   = 2 * time.Second
	)
	link := &laggedLink{lag: lag}
	startShardManager(ctx, g, link, shard)

	ns, err := env.CreateNamespace(ctx, "bundle-patches")
	g.Expect(err).NotTo(HaveOccurred())
	clusterNSs := make([]string, n)
	for i := range clusterNSs {
		clusterNSs[i] = newCluster(ctx, g, ns.Name, fmt.Sprintf("c%02d", i))
	}
	b := appBundle(ns.Name)
	b.Labels = map[string]string{fleet.ShardRefLabel: shard}
	g.Expect(env.Create(ctx, b)).To(Succeed())

	// The agents' part: each deployment applied and Ready on the
	// deploymentID it has, other than old.
	readyAll := func(old map[string]string) map[string]string {
		ids := map[string]string{}
		for _, clusterNS := range clusterNSs {
			g.Eventually(func(g Gomega) {
				bd := &fleet.BundleDeployment{}
				g.Expect(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: b.Name}, bd)).To(Succeed())
				g.Expect(bd.Spec.DeploymentID).NotTo(BeEmpty())
				g.Expect(bd.Spec.DeploymentID).NotTo(Equal(old[clusterNS]))
				bd.Status.AppliedDeploymentID = bd.Spec.DeploymentID
				bd.Status.Ready, bd.Status.NonModified = true, true
				g.Expect(env.Status().Update(ctx, bd)).To(Succeed())
				ids[clusterNS] = bd.Spec.DeploymentID
			}).WithTimeout(timeout).Should(Succeed(), "the BundleDeployment in %s applied and Ready", clusterNS)
		}
		return ids
	}
	readyOn := func(generation int64) {
		g.Eventually(func(g Gomega) {
			got := &fleet.Bundle{}
			g.Expect(env.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
			g.Expect(got.Status.ObservedGeneration).To(BeNumerically(">=", generation))
			g.Expect(got.Status.Summary.Ready).To(Equal(n))
		}).WithTimeout(timeout).Should(Succeed(), "the bundle Ready on its %d clusters", n)
	}
	first := readyAll(nil)
	readyOn(1)

	before := link.patches.Load()
	var generation int64
	g.Eventually(func(g Gomega) {
		got := &fleet.Bundle{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
		got.Spec.Resources[0].Content += "data: {version: v2}\n"
		g.Expect(env.Update(ctx, got)).To(Succeed())
		generation = got.Generation
	}).WithTimeout(timeout).Should(Succeed(), "the bundle's spec changed")
	readyAll(first)
	readyOn(generation)
	// The passes the agents' status writes bring, seen through the lagging
	// watch, write nothing either.
	g.Consistently(func() int64 { return link.patches.Load() - before }).
		WithTimeout(2*lag+time.Second).Should(BeNumerically("<=", n),
		"BundleDeployment patches for one spec change of a bundle on %d clusters", n)
	g.Expect(link.patches.Load()-before).To(BeNumerically("==", n), "one patch per BundleDeployment")

	// A change by someone else is still undone, the version written
	// still trusted over the cache's older one only until the watch
	// delivers the newer.
	want := ""
	g.Eventually(func(g Gomega) {
		bd := &fleet.BundleDeployment{}
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: clusterNSs[0], Name: b.Name}, bd)).To(Succeed())
		want = bd.Spec.DeploymentID
		bd.Spec.DeploymentID, bd.Spec.StagedDeploymentID = first[clusterNSs[0]], first[clusterNSs[0]]
		g.Expect(env.Update(ctx, bd)).To(Succeed())
	}).WithTimeout(timeout).Should(Succeed(), "a BundleDeployment's spec changed by someone else")
	g.Eventually(func(g Gomega) {
		bd := &fleet.BundleDeployment{}
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: clusterNSs[0], Name: b.Name}, bd)).To(Succeed())
		g.Expect(bd.Spec.DeploymentID).To(Equal(want))
		g.Expect(bd.Spec.StagedDeploymentID).To(Equal(want))
	}).WithTimeout(timeout).Should(Succeed(), "the bundle controller wrote its deploymentID back")
}

// startShardManager runs a second bundle controller, for the bundles of
// shard, whose requests to the API server go through link.
func startShardManager(ctx context.Context, g Gomega, link *laggedLink, shard string) {
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &laggedRoundTripper{next: rt, link: link} })
	defaults := enqueue.ControllerDefaults()
	// The suite's manager runs a controller of the same name.
	defaults.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     controllers.Scheme(),
		Controller: defaults,
		Cache:      controllers.CacheOptions(controllers.Options{}),
		Metrics:    metricsserver.Options{BindAddress: "0"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect((&bundle.Reconciler{Client: mgr.GetClient(), Workers: 2, Shard: shard}).SetupWithManager(ctx, mgr)).To(Succeed())
	go func() { _ = mgr.Start(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	g.Expect(mgr.GetCache().WaitForCacheSync(syncCtx)).To(BeTrue(), "the shard manager's cache synced")
}

// laggedLink delivers the events of BundleDeployment watches lag late, as a
// loaded API server does, and counts the BundleDeployment patches sent.
type laggedLink struct {
	lag     time.Duration
	patches atomic.Int64
}

type laggedRoundTripper struct {
	next http.RoundTripper
	link *laggedLink
}

func (l *laggedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	deployments := strings.Contains(req.URL.Path, "/bundledeployments")
	if deployments && req.Method == http.MethodPatch && !strings.HasSuffix(req.URL.Path, "/status") {
		l.link.patches.Add(1)
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil || !deployments || req.URL.Query().Get("watch") != "true" {
		return resp, err
	}
	resp.Body = newLaggedBody(resp.Body, l.link.lag)
	return resp, nil
}

// laggedBody hands out what it reads from body lag after it arrived.
type laggedBody struct {
	body   io.ReadCloser
	lag    time.Duration
	chunks chan chunk
	done   chan struct{}
	closed sync.Once
	rest   []byte
}

type chunk struct {
	data []byte
	at   time.Time
	err  error
}

func newLaggedBody(body io.ReadCloser, lag time.Duration) *laggedBody {
	b := &laggedBody{body: body, lag: lag, chunks: make(chan chunk, 1024), done: make(chan struct{})}
	go func() {
		for {
			buf := make([]byte, 32*1024)
			n, err := body.Read(buf)
			select {
			case b.chunks <- chunk{data: buf[:n], at: time.Now(), err: err}:
			case <-b.done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return b
}

func (b *laggedBody) Read(p []byte) (int, error) {
	for len(b.rest) == 0 {
		var c chunk
		select {
		case c = <-b.chunks:
		case <-b.done:
			return 0, io.ErrClosedPipe
		}
		select {
		case <-time.After(time.Until(c.at.Add(b.lag))):
		case <-b.done:
			return 0, io.ErrClosedPipe
		}
		if len(c.data) == 0 && c.err != nil {
			return 0, c.err
		}
		b.rest = c.data
		if c.err != nil {
			// The data first, the error with the next read.
			b.chunks = prepend(c.err)
		}
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// prepend is a channel holding only err: what follows the last data read.
func prepend(err error) chan chunk {
	c := make(chan chunk, 1)
	c <- chunk{err: err}
	return c
}

func (b *laggedBody) Close() error {
	b.closed.Do(func() { close(b.done) })
	return b.body.Close()
}
