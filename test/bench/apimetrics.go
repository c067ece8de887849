package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/gitfleet/fleet/test/framework"
)

// apiRequests reads the API server's request counters so far, keyed
// "VERB resource[/subresource]", with " (code)" for those refused.
func apiRequests(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return parseRequests(string(raw)), nil
}

// storage is what the API server holds in etcd: objects by resource and
// the database size (apiserver_storage_size_bytes, which the API server
// refreshes about once a minute).
type storage struct {
	objects map[string]float64
	dbBytes float64
}

// apiStorage counts the objects of every listable resource by listing
// their metadata in pages (the storage metric lags by a minute, and a
// list's remainingItemCount from the watch cache is not exact), and reads
// the database size from the metrics. It loads the API server: it runs
// after an experiment's window, never inside one.
func apiStorage(ctx context.Context, cfg *rest.Config) (storage, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return storage{}, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return storage{}, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	st := parseStorage(string(raw))
	quiet := rest.CopyConfig(cfg)
	quiet.WarningHandler = rest.NoWarnings{} // deprecated kinds are counted too
	quiet.QPS, quiet.Burst = -1, 0
	meta, err := metadata.NewForConfig(quiet)
	if err != nil {
		return st, err
	}
	lists, err := cs.Discovery().ServerPreferredResources()
	if err != nil {
		return st, err
	}
	st.objects = map[string]float64{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || gv.Group == "events.k8s.io" { // the core events again
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || r.Name == "componentstatuses" {
				continue
			}
			n, cont := 0, ""
			for {
				list, err := meta.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{Limit: 2000, Continue: cont})
				if err != nil {
					break
				}
				n += len(list.Items)
				if cont = list.Continue; cont == "" {
					break
				}
			}
			if n > 0 {
				name := r.Name
				if gv.Group != "" {
					name += "." + gv.Group
				}
				st.objects[name] = float64(n)
			}
		}
	}
	return st, nil
}

// countObjects records in r what etcd holds now (see apiStorage).
func countObjects(ctx context.Context, cfg *rest.Config, r *Result) {
	if st, err := apiStorage(ctx, cfg); err == nil {
		r.EtcdObjects, r.EtcdObjectsByKind, r.EtcdDBMB = st.total(), st.text(), st.dbBytes/(1<<20)
	}
}

func parseStorage(metrics string) storage {
	st := storage{objects: map[string]float64{}}
	for _, line := range strings.Split(metrics, "\n") {
		var rest string
		var ok, size bool
		if rest, ok = strings.CutPrefix(line, "apiserver_storage_objects{"); !ok {
			if rest, size = strings.CutPrefix(line, "apiserver_storage_size_bytes{"); !size {
				continue
			}
		}
		i := strings.LastIndexByte(rest, ' ')
		v, err := strconv.ParseFloat(rest[i+1:], 64)
		if err != nil || v < 0 {
			continue
		}
		if size {
			st.dbBytes = max(st.dbBytes, v)
			continue
		}
		for _, m := range labelRE.FindAllStringSubmatch(rest[:i], -1) {
			if m[1] == "resource" {
				st.objects[m[2]] += v
			}
		}
	}
	return st
}

// total is the number of objects, and text the kinds holding most:
// "bundledeployments.fleet.cattle.io 10000, rolebindings... ".
func (s storage) total() float64 {
	t := 0.0
	for _, v := range s.objects {
		t += v
	}
	return t
}

func (s storage) text() string {
	keys := make([]string, 0, len(s.objects))
	for k := range s.objects {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return s.objects[keys[i]] > s.objects[keys[j]] })
	parts := make([]string, 0, 10)
	for i, k := range keys {
		if i == 10 || s.objects[k] == 0 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", k, s.objects[k]))
	}
	return strings.Join(parts, ", ")
}

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

func parseRequests(metrics string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(metrics, "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		v, err := strconv.ParseFloat(rest[i+1:], 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, m := range labelRE.FindAllStringSubmatch(rest[:i], -1) {
			labels[m[1]] = m[2]
		}
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		if c := labels["code"]; c != "" && c[0] != '2' && c != "0" {
			key += " (" + c + ")" // refused: conflicts, AlreadyExists, throttling
		}
		out[key] += v
	}
	return out
}

func isWrite(key string) bool {
	switch verb, _, _ := strings.Cut(key, " "); verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		return true
	}
	return false
}

// writesSince summarizes the writes between two readings, most first:
// "API writes N: PATCH bundledeployments/status 10000, POST ...".
func writesSince(before, after map[string]float64) string {
	return requestsSince("API writes", before, after, isWrite)
}

// writesTotal is the number of writes between two readings (before may be
// nil: since the start).
func writesTotal(before, after map[string]float64) float64 {
	total := 0.0
	for k, v := range after {
		if isWrite(k) {
			total += v - before[k]
		}
	}
	return total
}

// readsSince does the same for reads (GET, LIST, WATCH): what waiting
// agents and informers cost the API server.
func readsSince(before, after map[string]float64) string {
	return requestsSince("API reads", before, after, func(k string) bool { return !isWrite(k) })
}

func requestsSince(title string, before, after map[string]float64, keep func(string) bool) string {
	type kv struct {
		k string
		v float64
	}
	var rows []kv
	total := 0.0
	for k, v := range after {
		if !keep(k) {
			continue
		}
		if d := v - before[k]; d >= 1 {
			rows = append(rows, kv{k, d})
			total += d
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].v > rows[j].v })
	parts := make([]string, 0, 10)
	for i, r := range rows {
		if i == 10 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", r.k, r.v))
	}
	return fmt.Sprintf("%s %.0f: %s", title, total, strings.Join(parts, ", "))
}

// manager is the fleet-manager process and where it serves its metrics.
type manager struct {
	*framework.Process
	metricsURL string
	// webhookURL is where it serves the git push webhook, whose calls
	// are signed with webhookSecret.
	webhookURL, webhookSecret string
}

// metricsUpdateSeconds reads fleet_metrics_update_seconds_total from the
// manager's metrics endpoint: the time its state-metrics handlers spent so
// far (0 when it cannot be read).
func (m *manager) metricsUpdateSeconds() float64 {
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
		if v, ok := strings.CutPrefix(line, "fleet_metrics_update_seconds_total "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}
