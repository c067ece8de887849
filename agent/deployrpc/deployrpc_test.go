package deployrpc

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// An error crosses the process boundary with its kind and reason: the
// agent's status and retries stay what they were in one process.
func TestErrorsKeepTheirKindAndReason(t *testing.T) {
	g := NewWithT(t)
	stall := EncodeError(outcome.Stallf(fleet.ReasonInstallFailed, "chart broken")).Err()
	g.Expect(outcome.IsStalling(stall)).To(BeTrue())
	g.Expect(outcome.ReasonOf(stall, "")).To(Equal(fleet.ReasonInstallFailed))
	g.Expect(stall).To(MatchError("chart broken"))

	wait := EncodeError(outcome.Waitf(fleet.ReasonNamespaceMissing, 30*time.Second, "namespace missing")).Err()
	var w *outcome.Waiting
	g.Expect(errors.As(wait, &w)).To(BeTrue())
	g.Expect(w.Reason).To(Equal(fleet.ReasonNamespaceMissing))
	g.Expect(w.After).To(Equal(30 * time.Second))

	plain := EncodeError(errors.New("connection refused")).Err()
	g.Expect(outcome.IsStalling(plain) || outcome.IsWaiting(plain)).To(BeFalse())
	g.Expect(plain).To(MatchError("connection refused"))
	g.Expect(EncodeError(nil).Err()).To(Succeed())
}

func TestConnectionRoundTrip(t *testing.T) {
	g := NewWithT(t)
	cfg := &rest.Config{Host: "https://10.0.0.1:6443", BearerTokenFile: "/var/run/token", QPS: 50, Burst: 100,
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), ServerName: "kubernetes"}}
	c, err := ConnectionOf(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.RESTConfig()).To(Equal(cfg))

	// A credential plugin crosses as JSON; the child runs it without a
	// terminal, its standard input being the request.
	exec := rest.CopyConfig(cfg)
	exec.ExecProvider = &clientcmdapi.ExecConfig{Command: "login-helper", Args: []string{"token"}, APIVersion: "client.authentication.k8s.io/v1",
		Env: []clientcmdapi.ExecEnvVar{{Name: "REGION", Value: "eu"}}, InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode}
	exec.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"idp-issuer-url": "https://issuer"}}
	c, err = ConnectionOf(exec)
	g.Expect(err).NotTo(HaveOccurred())
	wire, err := json.Marshal(c)
	g.Expect(err).NotTo(HaveOccurred())
	var back Connection
	g.Expect(json.Unmarshal(wire, &back)).To(Succeed())
	got := back.RESTConfig()
	g.Expect(got.ExecProvider.Command).To(Equal("login-helper"))
	g.Expect(got.ExecProvider.Args).To(Equal([]string{"token"}))
	g.Expect(got.ExecProvider.Env).To(Equal(exec.ExecProvider.Env))
	g.Expect(got.ExecProvider.APIVersion).To(Equal("client.authentication.k8s.io/v1"))
	g.Expect(got.ExecProvider.InteractiveMode).To(Equal(clientcmdapi.NeverExecInteractiveMode))
	g.Expect(got.ExecProvider.StdinUnavailable).To(BeTrue())
	g.Expect(got.AuthProvider).To(Equal(exec.AuthProvider))
	g.Expect(exec.ExecProvider.InteractiveMode).To(Equal(clientcmdapi.IfAvailableExecInteractiveMode), "the agent's own config is left as it was")
	wrapped := rest.CopyConfig(cfg)
	wrapped.Wrap(func(rt http.RoundTripper) http.RoundTripper { return rt })
	_, err = ConnectionOf(wrapped)
	g.Expect(err).To(MatchError(ContainSubstring("custom transport")))
}

// Find names the flag when the binary is missing, and finds it in $PATH.
func TestFind(t *testing.T) {
	g := NewWithT(t)
	_, err := Find("/nonexistent/fleet-agent-deploy")
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonDeployBinaryMissing))
	g.Expect(err).To(MatchError(ContainSubstring("--deploy-binary")))

	dir := t.TempDir()
	t.Setenv("PATH", dir)
	_, err = Find("")
	g.Expect(err).To(MatchError(ContainSubstring("neither beside the agent")))
	g.Expect(err).To(MatchError(ContainSubstring("--deploy-binary")))
	bin := filepath.Join(dir, BinaryName)
	g.Expect(os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)).To(Succeed())
	got, err := Find("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(bin))
}

// The child's zap lines become the agent's own log entries.
func TestLogLines(t *testing.T) {
	g := NewWithT(t)
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	msg := logLine(log, nil, `{"level":"info","ts":1.5,"msg":"Rolling back","release":"ns/app","toRevision":2}`)
	g.Expect(msg).To(Equal("Rolling back"))
	g.Expect(lines[0]).To(ContainSubstring(`"msg"="Rolling back"`))
	g.Expect(lines[0]).To(ContainSubstring(`"release"="ns/app"`))
	g.Expect(lines[0]).To(ContainSubstring(`"toRevision"=2`))
	g.Expect(lines[0]).NotTo(ContainSubstring(`"ts"`))
	g.Expect(logLine(log, nil, `{"level":"error","msg":"failed","error":"boom"}`)).To(Equal("failed: boom"))
	g.Expect(logLine(log, nil, "panic: something")).To(Equal("panic: something"))
	g.Expect(strings.Join(lines, "\n")).To(ContainSubstring("panic: something"))
}

// A forwarded line carries each key once: the release the agent names on
// the child's lines is not repeated from the child's own entry, and a child
// naming another release keeps it under its own key.
func TestForwardedLinesCarryEachKeyOnce(t *testing.T) {
	g := NewWithT(t)
	script := filepath.Join(t.TempDir(), BinaryName)
	child := `#!/bin/sh
cat >/dev/null
echo '{"level":"info","ts":1.5,"msg":"Rolling back a release left pending","release":"apps/web","status":"pending-upgrade","toRevision":2}' >&2
echo '{"level":"info","ts":1.6,"msg":"Looking at another release","release":"other/db"}' >&2
echo 'not JSON' >&2
echo '{"version":` + strconv.Itoa(Version) + `}'
`
	g.Expect(os.WriteFile(script, []byte(child), 0o755)).To(Succeed())
	var mu sync.Mutex
	var lines []string
	log := funcr.NewJSON(func(obj string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, obj)
	}, funcr.Options{}).WithValues("controller", "bundledeployment", "namespace", "cluster-ns")
	r := &Runner{Binary: script, Config: &rest.Config{Host: "https://127.0.0.1:1"}}
	ctx := ctrl.LoggerInto(t.Context(), log)

	for _, req := range []*Request{
		{Op: OpDeploy, Deploy: &Deploy{Name: "web", Options: fleet.BundleDeploymentOptions{DefaultNamespace: "apps"}}},
		{Op: OpUninstall, Uninstall: &release.Release{Namespace: "apps", Name: "web"}},
	} {
		mu.Lock()
		lines = nil
		mu.Unlock()
		g.Expect(r.Run(ctx, req)).To(Succeed())
		mu.Lock()
		got := map[string]map[string]any{}
		for _, line := range lines {
			entry := entryOnce(t, line)
			got[entry["msg"].(string)] = entry
		}
		mu.Unlock()
		g.Expect(got).To(HaveLen(4), "%s: the child's three lines and the end of the run", req.Op)
		for msg, entry := range got {
			g.Expect(entry).To(HaveKeyWithValue("release", "apps/web"), "%s: %q", req.Op, msg)
			g.Expect(entry).To(HaveKeyWithValue("namespace", "cluster-ns"), "%s: %q", req.Op, msg)
		}
		g.Expect(got["Rolling back a release left pending"]).To(And(
			HaveKeyWithValue("status", "pending-upgrade"), HaveKeyWithValue("toRevision", BeNumerically("==", 2)),
			Not(HaveKey("childRelease"))))
		g.Expect(got["Looking at another release"]).To(HaveKeyWithValue("childRelease", "other/db"))
		g.Expect(got).To(HaveKey("not JSON"))
		g.Expect(got).To(HaveKeyWithValue("Deploy binary ended", HaveKeyWithValue("op", string(req.Op))))
	}
}

// entryOnce decodes a JSON log entry, failing when a key appears twice.
func entryOnce(t *testing.T, line string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("log line %s is not a JSON object", line)
	}
	entry := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		key := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		if _, twice := entry[key]; twice {
			t.Errorf("log line %s carries %q twice", line, key)
		}
		entry[key] = v
	}
	return entry
}
