package main

import (
	"bytes"
	"testing"

	"github.com/google/pprof/profile"
)

// stackProfile builds a CPU profile with one sample per stack (innermost
// function first) of the given nanoseconds, written and parsed back as the
// API server's would be.
func stackProfile(t *testing.T, stacks map[int64][]string) *profile.Profile {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}, Period: 10_000_000,
	}
	fns := map[string]*profile.Function{}
	for ns, stack := range stacks {
		s := &profile.Sample{Value: []int64{ns / 10_000_000, ns}}
		for _, name := range stack {
			fn := fns[name]
			if fn == nil {
				fn = &profile.Function{ID: uint64(len(fns) + 1), Name: name}
				fns[name] = fn
				p.Function = append(p.Function, fn)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: fn}}}
			p.Location = append(p.Location, loc)
			s.Location = append(s.Location, loc)
		}
		p.Sample = append(p.Sample, s)
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	parsed, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}

func TestCPUSharesByStack(t *testing.T) {
	p := stackProfile(t, map[int64][]string{
		// 200 ms in the RBAC authorizer, under the authorization filter.
		200_000_000: {"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac.(*RBACAuthorizer).Authorize",
			"k8s.io/apiserver/pkg/endpoints/filters.withAuthorization.func1", "net/http.HandlerFunc.ServeHTTP"},
		// 500 ms of a status patch: etcd and JSON inside the status storage.
		// It passes through the cacher on its way to etcd: not watch
		// dispatch. Its patch is a merge patch.
		500_000_000: {"go.etcd.io/etcd/client/v3.(*kv).Do", "k8s.io/apiserver/pkg/storage/etcd3.(*store).GuaranteedUpdate",
			"k8s.io/apiserver/pkg/storage/cacher.(*CacheDelegator).GuaranteedUpdate",
			"k8s.io/apiserver/pkg/endpoints/handlers.(*jsonPatcher).applyPatchToCurrentObject",
			"k8s.io/apiextensions-apiserver/pkg/registry/customresource.(*StatusREST).Update",
			"k8s.io/apiserver/pkg/endpoints/handlers.PatchResource.func1",
			"k8s.io/apiserver/pkg/endpoints/filters.withAuthorization.func1"},
		// 300 ms dispatching watch events.
		300_000_000: {"encoding/json.Marshal", "k8s.io/apiserver/pkg/storage/cacher.(*Cacher).dispatchEvents"},
	})
	shares, cpu := cpuShares(p)
	if cpu < 0.999 || cpu > 1.001 {
		t.Errorf("profile CPU = %.3f s, want 1 s", cpu)
	}
	want := map[string]float64{
		"authz": 0.2, "status_writes": 0.5, "writes": 0.5, "etcd_client": 0.5, "watch_dispatch": 0.3,
		"serialization": 0.3, "admission": 0, "reads": 0, "watch_serve": 0,
		"merge_patches": 0.5, "apply_patches": 0,
	}
	for name, w := range want {
		if got := shares[name]; got < w-1e-9 || got > w+1e-9 {
			t.Errorf("share %s = %.3f, want %.3f (all: %s)", name, got, w, sharesText(shares))
		}
	}
}

func TestParseStorage(t *testing.T) {
	st := parseStorage(`# HELP apiserver_storage_objects x
apiserver_storage_objects{resource="bundledeployments.fleet.cattle.io"} 5000
apiserver_storage_objects{resource="rolebindings.rbac.authorization.k8s.io"} 2000
apiserver_storage_objects{resource="events"} -1
apiserver_storage_size_bytes{storage_cluster_id="abc"} 1.048576e+07
`)
	if st.total() != 7000 || st.dbBytes != 10485760 {
		t.Errorf("total %v, db %v; want 7000 objects (the unknown -1 left out) and 10 MiB", st.total(), st.dbBytes)
	}
	if st.text() != "bundledeployments.fleet.cattle.io 5000, rolebindings.rbac.authorization.k8s.io 2000" {
		t.Errorf("text %q", st.text())
	}
}
