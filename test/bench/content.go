package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/chartrepo"
)

// The content experiment: what a bundle's content costs etcd, with the
// content in etcd (the Bundle's resources and a Content) and in OCI storage
// (docs/ocistorage.md: the content in a loopback registry, the Bundle
// holding only its contentsId, each BundleDeployment an agent Secret
// beside it). For each size, a GitRepo of one bundle targets every
// simulated cluster, once each way; the simulated agents read each new
// content as the real agent does (a get of the Content, or a pull from the
// registry) before reporting Ready. The bytes are read from etcd itself
// (etcdstore.go): each object's value as the API server stored it. The
// floor of each way is the same rollout of a bundle of one small ConfigMap:
// what the same objects cost with next to no content.

// contentSize is one bundle size: files YAML files of size bytes each, half
// random (base64 of random bytes, which compresses as a packaged chart's
// CRDs and dashboards do: poorly) and half repetitive; no files is the
// floor's one small ConfigMap.
type contentSize struct {
	label       string
	files, size int
}

// contentSizes are the sizes measured, the floor first; the last is over
// etcd's request limit (1.5 MiB) in a Bundle.
var contentSizes = []contentSize{{"floor", 0, 0}, {"40kib", 10, 4 << 10}, {"640kib", 40, 16 << 10}, {"1900kib", 60, 32 << 10}}

// contentStorages are the two ways a content is stored.
var contentStorages = []string{"etcd", "oci"}

// contentSecret is the OCI storage Secret the oci GitRepos name.
const contentSecret = "bench-content-oci"

// ContentFigures are one content run's figures: bytes as etcd stores them.
type ContentFigures struct {
	Storage string `json:"storage"`
	// FileBytes is the bundle's files' size.
	FileBytes int `json:"file_bytes"`
	// Refused is why the bundle could not be stored (empty: it was).
	Refused string `json:"refused,omitempty"`
	// BundleBytes and ContentBytes are the Bundle and its Content in etcd;
	// BDBytes and SecretBytes a BundleDeployment and its agent Secret, on
	// average over the clusters.
	BundleBytes  int     `json:"bundle_bytes"`
	ContentBytes int     `json:"content_bytes"`
	BDBytes      float64 `json:"bd_bytes"`
	SecretBytes  float64 `json:"secret_bytes"`
	// FloorPerBundle and FloorPerBD are the floor's: the same objects with
	// next to no content.
	FloorPerBundle float64 `json:"floor_per_bundle_bytes,omitempty"`
	FloorPerBD     float64 `json:"floor_per_bd_bytes,omitempty"`
	// EtcdReceived and EtcdSent are etcd's traffic with the API server
	// over the rollout: what it received (every version written, whole:
	// the Bundle again at each of its status writes) and sent (reads, and
	// a watch event per write).
	EtcdReceived float64 `json:"etcd_received_bytes"`
	EtcdSent     float64 `json:"etcd_sent_bytes"`
	// The registry's traffic: requests (401 challenges included), blobs
	// pulled per cluster and bytes pulled; and the contents the agents
	// read (Content gets or pulls) and their bytes (the Content's gzip, or
	// the pulled manifest).
	RegistryRequests int64   `json:"registry_requests"`
	PullsPerCluster  float64 `json:"pulls_per_cluster"`
	PulledBytes      int64   `json:"pulled_bytes"`
	AgentReads       int64   `json:"agent_content_reads"`
	AgentReadBytes   int64   `json:"agent_content_read_bytes"`
	AgentRetries     int64   `json:"agent_content_retries,omitempty"`
}

// perBundle and perBD are the etcd bytes one bundle, and one cluster
// deploying it, cost.
func (c *ContentFigures) perBundle() float64 { return float64(c.BundleBytes + c.ContentBytes) }
func (c *ContentFigures) perBD() float64     { return c.BDBytes + c.SecretBytes }

// contentFiles are the files of size s for storage (which the ConfigMaps
// name, so the two ways never share a content).
func contentFiles(storage string, s contentSize) map[string]string {
	if s.files == 0 {
		return map[string]string{"cm.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: content-%s}\ndata: {storage: %s}\n", storage, storage)}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	files := map[string]string{}
	for i := range s.files {
		raw := make([]byte, s.size/2*3/4)
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		text := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t%d-%s\ndata:\n  random: %s\n  filler: \"", i, storage, base64.StdEncoding.EncodeToString(raw))
		text += strings.Repeat("abcdefgh", max(0, s.size-len(text))/8)
		files[fmt.Sprintf("t%02d.yaml", i)] = text + "\"\n"
	}
	return files
}

// contentEnv is what every content run shares.
type contentEnv struct {
	store *etcdStore
	reg   *chartrepo.AuthRegistry
	git   *gittest.Server
	root  string
}

// Content runs the content experiment (see above) with f's agents.
func (f *fleetRun) Content(ctx context.Context) error {
	store, err := openEtcd(ctx, f.cp)
	if err != nil {
		return err
	}
	reg := chartrepo.NewAuthRegistry(map[string]chartrepo.Access{
		"pusher": {Password: "push-pw", Push: true, Prefixes: []string{"bench"}},
		"reader": {Password: "read-pw", Prefixes: []string{"bench"}},
	})
	defer reg.Close()
	if err := f.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: contentSecret, Namespace: fleet.DefaultWorkspace},
		Type: fleet.OCIStorageSecretType, StringData: map[string]string{"reference": reg.Host() + "/bench",
			"username": "pusher", "password": "push-pw", "agentUsername": "reader", "agentPassword": "read-pw", "basicHTTP": "true"}}); err != nil {
		return err
	}
	root, err := os.MkdirTemp("", "fleet-bench-content-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(root) }()
	git := gittest.NewServer(root)
	defer git.Close()
	for _, a := range f.agents {
		a.FetchContent.Store(true)
	}
	defer func() {
		for _, a := range f.agents {
			a.FetchContent.Store(false)
		}
	}()
	env := contentEnv{store: store, reg: reg, git: git, root: root}
	floors := map[string]Result{}
	for _, size := range contentSizes {
		for _, storage := range contentStorages {
			r, err := f.contentRun(ctx, env, storage, size, floors[storage])
			if err != nil {
				return fmt.Errorf("%s: %w", r.Experiment, err)
			}
			if size.files == 0 {
				floors[storage] = r
			}
			f.results = append(f.results, r)
			printJSON(r)
		}
	}
	return nil
}

// contentRun rolls out one bundle of size s stored as storage to every
// cluster, measures it beside floor (zero: this is the floor), and deletes
// it.
func (f *fleetRun) contentRun(ctx context.Context, env contentEnv, storage string, s contentSize, floor Result) (Result, error) {
	name := "content-" + storage + "-" + s.label
	r := Result{Experiment: name, Clusters: f.n, Bundles: 1}
	files := contentFiles(storage, s)
	fig := &ContentFigures{Storage: storage}
	for _, text := range files {
		fig.FileBytes += len(text)
	}
	repo, err := gittest.NewRepo(filepath.Join(env.root, name), "main")
	if err != nil {
		return r, err
	}
	if _, err := repo.Commit("content", files); err != nil {
		return r, err
	}
	gr := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultWorkspace},
		Spec: fleet.GitRepoSpec{Repo: env.git.RepoURL(name), Branch: "main",
			PollingInterval: &metav1.Duration{Duration: time.Hour},
			Targets: []fleet.GitTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"bench": "true"}}}}}}
	if storage == "oci" {
		gr.Spec.OCIRegistrySecret = contentSecret
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	tr := newBDTracker()
	defer f.observeAgents(nil)
	if err := f.track(runCtx, name, tr); err != nil {
		return r, err
	}
	fmt.Fprintf(os.Stderr, "Content: a bundle of %d bytes of files in %s for %d clusters\n", fig.FileBytes, storage, f.n)
	received, sent, err := env.store.traffic(ctx)
	if err != nil {
		return r, err
	}
	requests, pulls, pulled := env.reg.Requests(), env.reg.BlobPulls(), env.reg.BlobBytesServed()
	reads, readBytes, retries := f.agentReads()
	f.mark(ctx)
	cpu := cpuSeconds(f.mgr)
	start := time.Now()
	tr.arm(start)
	if err := f.c.Create(ctx, gr); err != nil {
		return r, err
	}
	var conditions []string
	if err := waitEvery(ctx, 250*time.Millisecond, 10*time.Minute, func() (bool, error) {
		if tr.readyCount() >= f.n {
			return true, nil
		}
		got := &fleet.GitRepo{}
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(gr), got); err != nil {
			return false, err
		}
		conditions = conditions[:0]
		for _, c := range got.Status.Conditions {
			if strings.Contains(c.Message, "too large") {
				fig.Refused = c.Message
				return true, nil
			}
			conditions = append(conditions, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
		}
		return false, nil
	}); err != nil {
		return r, fmt.Errorf("%d of %d BundleDeployments Ready (GitRepo %s: %s): %w", tr.readyCount(), f.n, name, strings.Join(conditions, "; "), err)
	}
	took := since(start)
	waitWritesSettle(ctx, f.cp, 3*time.Second, time.Minute)
	ready := tr.readyCount()
	r = f.measure(Result{Experiment: name, Objects: ready, Seconds: took, Rate: float64(ready) / took}, cpu)
	r.Bundles = 1
	if times := tr.clusterTimes(); len(times) > 0 {
		r.P50, r.P99 = times[len(times)/2].Seconds(), times[len(times)*99/100].Seconds()
	}
	if err := f.storedBytes(ctx, env.store, name, tr, fig); err != nil {
		return r, err
	}
	if in, out, err := env.store.traffic(ctx); err == nil {
		fig.EtcdReceived, fig.EtcdSent = in-received, out-sent
	}
	fig.RegistryRequests = env.reg.Requests() - requests
	fig.PullsPerCluster = float64(env.reg.BlobPulls()-pulls) / float64(f.n)
	fig.PulledBytes = env.reg.BlobBytesServed() - pulled
	nowReads, nowBytes, nowRetries := f.agentReads()
	fig.AgentReads, fig.AgentReadBytes, fig.AgentRetries = nowReads-reads, nowBytes-readBytes, nowRetries-retries
	if floor.Content != nil {
		fig.FloorPerBundle, fig.FloorPerBD = floor.Content.perBundle(), floor.Content.perBD()
		r.FloorSeconds = floor.Seconds
		if floor.Rate > 0 {
			r.FloorRatio = r.Rate / floor.Rate
		}
	}
	r.Content = fig
	r.Note = fig.text(r)
	return r, f.deleteContentRun(ctx, gr)
}

// agentReads sums the contents the simulated agents read, their bytes,
// and the reads tried again.
func (f *fleetRun) agentReads() (reads, bytes, retries int64) {
	for _, a := range f.agents {
		reads += a.ContentFetches.Load()
		bytes += a.ContentBytes.Load()
		retries += a.ContentRetries.Load()
	}
	return reads, bytes, retries
}

// storedBytes reads from etcd the bytes of the GitRepo name's Bundle and
// Content and of the BundleDeployments tr saw and their agent Secrets.
func (f *fleetRun) storedBytes(ctx context.Context, store *etcdStore, name string, tr *bdTracker, fig *ContentFigures) error {
	bundles := &metav1.PartialObjectMetadataList{}
	bundles.SetGroupVersionKind(fleet.GroupVersion.WithKind("BundleList"))
	if err := f.c.List(ctx, bundles, client.MatchingLabels{fleet.RepoLabel: name}); err != nil {
		return err
	}
	var bundleKeys []string
	for _, b := range bundles.Items {
		bundleKeys = append(bundleKeys, crKey("bundles", b.Namespace, b.Name))
	}
	var bdKeys, secretKeys []string
	contents := map[string]bool{}
	tr.mu.Lock()
	for key, st := range tr.state {
		ns, bd, _ := strings.Cut(key, "/")
		bdKeys = append(bdKeys, crKey("bundledeployments", ns, bd))
		secretKeys = append(secretKeys, secretKey(ns, bd))
		if id, _, ok := strings.Cut(st.id, ":"); ok {
			contents[id] = true
		}
	}
	tr.mu.Unlock()
	var contentKeys []string
	for id := range contents {
		contentKeys = append(contentKeys, crKey("contents", "", id))
	}
	var err error
	if fig.BundleBytes, _, err = store.sizes(ctx, bundleKeys); err != nil {
		return err
	}
	if fig.ContentBytes, _, err = store.sizes(ctx, contentKeys); err != nil {
		return err
	}
	bds, n, err := store.sizes(ctx, bdKeys)
	if err != nil {
		return err
	}
	secrets, _, err := store.sizes(ctx, secretKeys)
	if err != nil {
		return err
	}
	if n > 0 {
		fig.BDBytes, fig.SecretBytes = float64(bds)/float64(n), float64(secrets)/float64(n)
	}
	return nil
}

// deleteContentRun deletes the GitRepo and waits until its Bundle and
// BundleDeployments are gone.
func (f *fleetRun) deleteContentRun(ctx context.Context, gr *fleet.GitRepo) error {
	if err := f.c.Delete(ctx, gr); err != nil {
		return err
	}
	return waitEvery(ctx, 250*time.Millisecond, 5*time.Minute, func() (bool, error) {
		for _, kind := range []string{"BundleList", "BundleDeploymentList"} {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(fleet.GroupVersion.WithKind(kind))
			if err := f.c.List(ctx, list, client.MatchingLabels{fleet.RepoLabel: gr.Name}, client.Limit(1)); err != nil || len(list.Items) > 0 {
				return false, err
			}
		}
		return true, nil
	})
}

// text is the figures beside the floor's, for r's note.
func (c *ContentFigures) text(r Result) string {
	floor := func(v float64) string {
		if v == 0 {
			return ""
		}
		return fmt.Sprintf(" (floor %s)", bytesText(v))
	}
	s := fmt.Sprintf("%s files in %s: etcd per bundle %s%s, per BundleDeployment %s%s", bytesText(float64(c.FileBytes)), c.Storage,
		bytesText(c.perBundle()), floor(c.FloorPerBundle), bytesText(c.perBD()), floor(c.FloorPerBD))
	if c.Refused != "" {
		return s + "; refused: " + c.Refused
	}
	s += fmt.Sprintf("; etcd received %s and sent %s over the rollout", bytesText(c.EtcdReceived), bytesText(c.EtcdSent))
	if c.Storage == "oci" {
		s += fmt.Sprintf("; registry: %.2f pulls per cluster, %s pulled, %d requests", c.PullsPerCluster, bytesText(float64(c.PulledBytes)), c.RegistryRequests)
	} else {
		s += fmt.Sprintf("; agents read %d Contents, %s", c.AgentReads, bytesText(float64(c.AgentReadBytes)))
	}
	if c.AgentRetries > 0 {
		s += fmt.Sprintf(" (%d reads failed and were tried again)", c.AgentRetries)
	}
	s += fmt.Sprintf("; Ready on every cluster in %.1f s", r.Seconds)
	if r.FloorSeconds > 0 {
		s += fmt.Sprintf(" (floor %.1f s)", r.FloorSeconds)
	}
	return s
}

// bytesText is n bytes for people: 980 B, 41.2 KiB, 1.9 MiB.
func bytesText(n float64) string {
	switch {
	case n >= 1<<20 || n <= -1<<20:
		return fmt.Sprintf("%.2f MiB", n/(1<<20))
	case n >= 1<<10 || n <= -1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f B", n)
}

// floorBytes is a floor's bytes, "-" for the floor itself.
func floorBytes(n float64) string {
	if n == 0 {
		return "-"
	}
	return bytesText(n)
}

// printContent prints the content experiment's figures, each beside its
// floor, as a table.
func printContent(results []Result) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	header := false
	for _, r := range results {
		c := r.Content
		if c == nil {
			continue
		}
		if !header {
			fmt.Fprintf(tw, "\nContent, N=%d: bytes as etcd stores them (read from etcd)\n", r.Clusters)
			fmt.Fprintln(tw, "run\tfiles\tper bundle\tfloor\tper BD (+ Secret)\tfloor\tetcd in\tetcd out\tregistry pulls/cluster\tpulled\tagent reads (retries)\tReady s\tfloor s\tp99 s")
			header = true
		}
		state := num(r.Seconds)
		if c.Refused != "" {
			state = "refused"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s (+ %s)\t%s\t%s\t%s\t%.2f\t%s\t%d (%d)\t%s\t%s\t%s\n", r.Experiment, bytesText(float64(c.FileBytes)),
			bytesText(c.perBundle()), floorBytes(c.FloorPerBundle), bytesText(c.BDBytes), bytesText(c.SecretBytes), floorBytes(c.FloorPerBD),
			bytesText(c.EtcdReceived), bytesText(c.EtcdSent), c.PullsPerCluster, bytesText(float64(c.PulledBytes)), c.AgentReads, c.AgentRetries, state, num(r.FloorSeconds), num(r.P99))
	}
	return tw.Flush()
}
