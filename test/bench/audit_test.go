package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCountAuditByWriterAndNamespace(t *testing.T) {
	line := func(stage, user, ua, verb, ns, res, sub, ts string, code int) string {
		return `{"kind":"Event","stage":"` + stage + `","verb":"` + verb + `","userAgent":"` + ua + `","user":{"username":"` + user +
			`"},"objectRef":{"resource":"` + res + `","namespace":"` + ns + `","subresource":"` + sub +
			`"},"responseStatus":{"code":` + strconv.Itoa(code) + `},"stageTimestamp":"` + ts + `"}`
	}
	log := strings.Join([]string{
		line("ResponseComplete", "system:serviceaccount:c-1:agent", "fleet-agent", "patch", "cluster-ns-1", "leases", "", "2026-01-01T10:00:01.000000Z", 200),
		line("ResponseComplete", "system:serviceaccount:c-2:agent", "fleet-agent", "patch", "fleet-default", "clusters", "status", "2026-01-01T10:00:02.000000Z", 200),
		line("ResponseComplete", "admin", "fleet-manager/v0.0.0 (linux/amd64)", "update", "fleet-default", "clusters", "status", "2026-01-01T10:00:03.000000Z", 409),
		line("ResponseComplete", "admin", "bench/v0.0.0", "create", "sim-3", "secrets", "", "2026-01-01T10:00:03.500000Z", 201),
		line("ResponseComplete", "admin", "bench/v0.0.0", "create", "", "namespaces", "", "2026-01-01T10:00:03.600000Z", 201),
		line("ResponseComplete", "system:apiserver", "kube-apiserver", "update", "kube-system", "leases", "", "2026-01-01T10:00:03.700000Z", 200),
		// Not counted: another stage, and after the window's end.
		line("ResponseStarted", "admin", "fleet-manager", "patch", "fleet-default", "clusters", "", "2026-01-01T10:00:03.800000Z", 200),
		line("ResponseComplete", "admin", "fleet-manager", "patch", "fleet-default", "clusters", "", "2026-01-01T10:00:09.000000Z", 200),
		"not json",
	}, "\n")
	kinds := namespaceKinds{cluster: map[string]bool{"cluster-ns-1": true}, workspace: map[string]bool{"fleet-default": true}}
	end := time.Date(2026, 1, 1, 10, 0, 5, 0, time.UTC)
	c, err := countAudit(strings.NewReader(log), end, "admin", kinds)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		writer, ns string
		n          int
	}{{"agent", "cluster", 1}, {"agent", "workspace", 1}, {"manager", "workspace", 1}, {"downstream", "other", 1}, {"bench", "none", 1}, {"system", "other", 1}} {
		if got := c.byWriter[w.writer][w.ns]; got != w.n {
			t.Errorf("%s writes in %s namespaces = %d, want %d (%s)", w.writer, w.ns, got, w.n, c.text())
		}
	}
	if c.writer("manager") != 1 || c.writer("agent") != 2 {
		t.Errorf("manager %d, agent %d writes; want 1 and 2 (%s)", c.writer("manager"), c.writer("agent"), c.text())
	}
	if !strings.Contains(c.text(), "downstream other:sim-# create secrets 1") {
		t.Errorf("text %q does not name the other namespace", c.text())
	}
	if !strings.Contains(c.text(), "manager workspace update clusters/status (409) 1") {
		t.Errorf("text %q does not name the refused status update", c.text())
	}
}

func TestParseSizes(t *testing.T) {
	if got, err := parseSizes("500, 5000"); err != nil || len(got) != 2 || got[0] != 500 || got[1] != 5000 {
		t.Errorf("parseSizes(500, 5000) = %v, %v", got, err)
	}
	for _, bad := range []string{"500", "500,x", "0,10", ""} {
		if _, err := parseSizes(bad); err == nil || !strings.Contains(err.Error(), "-scaling-sizes") {
			t.Errorf("parseSizes(%q) = %v, want an error naming -scaling-sizes", bad, err)
		}
	}
}
