package deployrpc

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

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
	msg := logLine(log, `{"level":"info","ts":1.5,"msg":"Rolling back","release":"ns/app","toRevision":2}`)
	g.Expect(msg).To(Equal("Rolling back"))
	g.Expect(lines[0]).To(ContainSubstring(`"msg"="Rolling back"`))
	g.Expect(lines[0]).To(ContainSubstring(`"toRevision"=2`))
	g.Expect(lines[0]).NotTo(ContainSubstring(`"ts"`))
	g.Expect(logLine(log, `{"level":"error","msg":"failed","error":"boom"}`)).To(Equal("failed: boom"))
	g.Expect(logLine(log, "panic: something")).To(Equal("panic: something"))
	g.Expect(strings.Join(lines, "\n")).To(ContainSubstring("panic: something"))
}
