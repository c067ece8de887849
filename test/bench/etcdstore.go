package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/fleet/test/controlplane"
)

// etcdStore reads the bench API server's etcd directly, through etcd's
// JSON gateway (/v3/kv/range) and metrics: the bytes an
// object takes in the store are its key's value as the API server wrote
// it (JSON for custom resources, protobuf for built-in kinds such as
// Secrets), with the metadata the API server adds (managedFields, uid,
// timestamps). Nothing here goes through the API server.
type etcdStore struct {
	url string
	hc  *http.Client
}

// openEtcd finds the etcd cp's API server stores into and checks that the
// API server keeps its objects under /registry, as the keys here assume.
func openEtcd(ctx context.Context, cp *controlplane.ControlPlane) (*etcdStore, error) {
	u := cp.APIServer().EtcdURL
	if u == nil {
		return nil, fmt.Errorf("control plane %s: its API server names no etcd URL", cp.Name)
	}
	e := &etcdStore{url: u.String(), hc: &http.Client{Timeout: 30 * time.Second}}
	n, err := e.size(ctx, "/registry/namespaces/default")
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("etcd at %s holds no /registry/namespaces/default: the API server's --etcd-prefix is not /registry", e.url)
	}
	return e, nil
}

func (e *etcdStore) call(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.hc.Do(req)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s answered %s: %s", path, resp.Status, data)
	}
	return json.Unmarshal(data, out)
}

// size is the bytes key's value holds (0: no such key).
func (e *etcdStore) size(ctx context.Context, key string) (int, error) {
	// The gateway speaks base64 for bytes, as encoding/json does for []byte.
	var out struct {
		Kvs []struct {
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	if err := e.call(ctx, "/v3/kv/range", map[string][]byte{"key": []byte(key)}, &out); err != nil {
		return 0, err
	}
	if len(out.Kvs) == 0 {
		return 0, nil
	}
	return len(out.Kvs[0].Value), nil
}

// sizes sums the values of keys, read by workers at once, and counts those
// that exist.
func (e *etcdStore) sizes(ctx context.Context, keys []string) (total, found int, err error) {
	got := make([]int, len(keys))
	err = parallel(16, len(keys), func(i int) error {
		var err error
		got[i], err = e.size(ctx, keys[i])
		return err
	})
	for _, n := range got {
		total += n
		if n > 0 {
			found++
		}
	}
	return total, found, err
}

// traffic is the bytes etcd received from its clients (the API server's
// requests: every version of every object it writes, whole) and sent them
// (reads and watch events) so far: etcd's own counters, which the API
// server's compactions do not take back as they do the database's size.
func (e *etcdStore) traffic(ctx context.Context) (received, sent float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("etcd /metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, fmt.Errorf("etcd /metrics: %w", err)
	}
	received, sent, ok := parseEtcdTraffic(string(data))
	if !ok {
		return 0, 0, fmt.Errorf("etcd /metrics at %s has no etcd_network_client_grpc_received_bytes_total and sent_bytes_total", e.url)
	}
	return received, sent, nil
}

// parseEtcdTraffic reads etcd's client traffic counters from its metrics;
// ok is false without both.
func parseEtcdTraffic(metrics string) (received, sent float64, ok bool) {
	found := 0
	for _, line := range strings.Split(metrics, "\n") {
		name, value, cut := strings.Cut(line, " ")
		if !cut {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		switch {
		case err != nil:
		case name == "etcd_network_client_grpc_received_bytes_total":
			received, found = v, found+1
		case name == "etcd_network_client_grpc_sent_bytes_total":
			sent, found = v, found+1
		}
	}
	return received, sent, found == 2
}

// crKey is the etcd key of a fleet.cattle.io object of resource (plural)
// in namespace ns ("" for cluster-scoped).
func crKey(resource, ns, name string) string {
	if ns == "" {
		return "/registry/fleet.cattle.io/" + resource + "/" + name
	}
	return "/registry/fleet.cattle.io/" + resource + "/" + ns + "/" + name
}

// secretKey is the etcd key of a Secret.
func secretKey(ns, name string) string { return "/registry/secrets/" + ns + "/" + name }
