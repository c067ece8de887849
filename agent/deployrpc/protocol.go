package deployrpc

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Version is the protocol's version; a child refuses a Request of another
// version (the agent and its deploy binary ship together). Version 2 added
// MemoryLimit: a child that would ignore it is refused; version 3 added
// Deploy.Chart, likewise.
const Version = 3

// Op is what a Request asks for.
type Op string

// The operations.
const (
	// OpDeploy installs or upgrades a BundleDeployment's release.
	OpDeploy Op = "deploy"
	// OpUninstall removes a release whose BundleDeployment is gone.
	OpUninstall Op = "uninstall"
)

// Request is one operation for fleet-agent-deploy.
type Request struct {
	Version int `json:"version"`
	Op      Op  `json:"op"`
	// Connection reaches the agent's own cluster.
	Connection Connection `json:"connection"`
	// ClusterNamespace is the agent's cluster namespace upstream; it marks
	// the releases as the agent's.
	ClusterNamespace string `json:"clusterNamespace"`
	// SystemNamespace is the agent's namespace; never deleted.
	SystemNamespace string `json:"systemNamespace,omitempty"`
	// NamespaceMissingRetry is how often a bundle with createNamespace:
	// false looks again for its namespace (0: the default).
	NamespaceMissingRetry time.Duration `json:"namespaceMissingRetry,omitempty"`
	// MemoryLimit bounds the memory the child maps, in bytes (see
	// LimitMemory); 0 sets no bound.
	MemoryLimit int64 `json:"memoryLimit,omitempty"`
	// ChartCacheDir is where the child keeps the charts it downloads for
	// HelmOps' BundleDeployments, to deploy them again without downloading
	// them (the agent's own directory); empty: none are kept.
	ChartCacheDir string `json:"chartCacheDir,omitempty"`
	// Deploy is the deployment to make, with OpDeploy.
	Deploy *Deploy `json:"deploy,omitempty"`
	// Uninstall is the latest revision of the release to remove, with
	// OpUninstall: its name, namespace and chart annotations tell how.
	Uninstall *release.Release `json:"uninstall,omitempty"`
}

// release is the release r is about.
func (r *Request) release() release.Key {
	switch {
	case r.Deploy != nil:
		return release.For(r.Deploy.Name, r.Deploy.Options)
	case r.Uninstall != nil:
		return r.Uninstall.Key()
	}
	return release.Key{}
}

// Deploy is one deployment to make.
type Deploy struct {
	// Name is the BundleDeployment's name.
	Name string `json:"name"`
	// DeploymentID is the BundleDeployment's spec.deploymentID.
	DeploymentID string `json:"deploymentID"`
	// Options are the BundleDeployment's spec.options.
	Options fleet.BundleDeploymentOptions `json:"options"`
	// Resources are the bundle's files, from its Content (checked).
	Resources []fleet.BundleResource `json:"resources,omitempty"`
	// Chart, for a BundleDeployment with helmChartOptions (a HelmOp's),
	// is the chart the child downloads and deploys instead of Resources.
	Chart *ChartSource `json:"chart,omitempty"`
}

// ChartSource is the chart a HelmOp's BundleDeployment names (its
// options.helm repo, chart and version) and how to reach it: the
// helmChartOptions and the Secret they name, which the resident agent read
// in its cluster namespace. The credentials travel on the child's standard
// input only.
type ChartSource struct {
	// Repo, Chart and Version are options.helm's: a chart repository URL
	// and a chart name, an oci:// reference (in Repo, or in Chart with
	// Repo empty), or a chart URL in Chart; Version exact.
	Repo    string `json:"repo,omitempty"`
	Chart   string `json:"chart,omitempty"`
	Version string `json:"version,omitempty"`
	// Username and Password are sent as basic auth to the host of the
	// repository, registry or chart URL only.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// CABundle holds PEM CAs to trust besides the system's.
	CABundle []byte `json:"caBundle,omitempty"`
	// InsecureSkipTLSVerify turns off TLS verification.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
	// SecretName is the Secret the credentials came from
	// ("namespace/name"), for messages; empty for none.
	SecretName string `json:"secretName,omitempty"`
}

// Response is the outcome of a Request.
type Response struct {
	Version int `json:"version"`
	// Error is why the operation failed; nil when it succeeded.
	Error *Error `json:"error,omitempty"`
}

// Kinds of Error, as the internal/outcome vocabulary has them.
const (
	KindStalling = "Stalling"
	KindWaiting  = "Waiting"
	KindError    = "Error"
)

// Error is a failure, with what the agent's status and retries need of it.
type Error struct {
	// Kind is KindStalling, KindWaiting or KindError (transient).
	Kind string `json:"kind"`
	// Reason is the condition reason of a Stalling or Waiting error.
	Reason string `json:"reason,omitempty"`
	// After is when a Waiting error asks to be looked at again.
	After time.Duration `json:"after,omitempty"`
	// Message is the error's text.
	Message string `json:"message"`
}

// EncodeError describes err for a Response; nil for nil.
func EncodeError(err error) *Error {
	if err == nil {
		return nil
	}
	var s *outcome.Stalling
	var w *outcome.Waiting
	switch {
	case errors.As(err, &s):
		return &Error{Kind: KindStalling, Reason: s.Reason, Message: err.Error()}
	case errors.As(err, &w):
		return &Error{Kind: KindWaiting, Reason: w.Reason, After: w.After, Message: err.Error()}
	}
	return &Error{Kind: KindError, Message: err.Error()}
}

// Err is the error e describes; nil for nil.
func (e *Error) Err() error {
	if e == nil {
		return nil
	}
	err := errors.New(e.Message)
	switch e.Kind {
	case KindStalling:
		return outcome.Stall(e.Reason, err)
	case KindWaiting:
		return outcome.Wait(e.Reason, e.After, err)
	}
	return err
}

// Connection is a REST config, what of it can cross a process boundary.
type Connection struct {
	Host            string  `json:"host"`
	APIPath         string  `json:"apiPath,omitempty"`
	Insecure        bool    `json:"insecure,omitempty"`
	ServerName      string  `json:"serverName,omitempty"`
	CAFile          string  `json:"caFile,omitempty"`
	CAData          []byte  `json:"caData,omitempty"`
	CertFile        string  `json:"certFile,omitempty"`
	CertData        []byte  `json:"certData,omitempty"`
	KeyFile         string  `json:"keyFile,omitempty"`
	KeyData         []byte  `json:"keyData,omitempty"`
	BearerToken     string  `json:"bearerToken,omitempty"`
	BearerTokenFile string  `json:"bearerTokenFile,omitempty"`
	Username        string  `json:"username,omitempty"`
	Password        string  `json:"password,omitempty"`
	QPS             float32 `json:"qps,omitempty"`
	Burst           int     `json:"burst,omitempty"`
	// Exec and AuthProvider are the kubeconfig's credential plugins: the
	// child runs the plugin itself, without a terminal (its standard input
	// carries the request).
	Exec         *clientcmdapi.ExecConfig         `json:"exec,omitempty"`
	AuthProvider *clientcmdapi.AuthProviderConfig `json:"authProvider,omitempty"`
}

// ConnectionOf describes cfg. A config that dials through code cannot be
// described.
func ConnectionOf(cfg *rest.Config) (Connection, error) {
	if cfg.Transport != nil || cfg.Dial != nil || cfg.WrapTransport != nil {
		return Connection{}, fmt.Errorf("the agent's REST config has a custom transport, which fleet-agent-deploy cannot be handed")
	}
	return Connection{
		Host: cfg.Host, APIPath: cfg.APIPath, Insecure: cfg.Insecure, ServerName: cfg.ServerName,
		CAFile: cfg.CAFile, CAData: cfg.CAData, CertFile: cfg.CertFile, CertData: cfg.CertData,
		KeyFile: cfg.KeyFile, KeyData: cfg.KeyData, BearerToken: cfg.BearerToken, BearerTokenFile: cfg.BearerTokenFile,
		Username: cfg.Username, Password: cfg.Password, QPS: cfg.QPS, Burst: cfg.Burst,
		Exec: cfg.ExecProvider, AuthProvider: cfg.AuthProvider,
	}, nil
}

// RESTConfig is the REST config c describes.
func (c Connection) RESTConfig() *rest.Config {
	cfg := &rest.Config{
		Host: c.Host, APIPath: c.APIPath,
		TLSClientConfig: rest.TLSClientConfig{Insecure: c.Insecure, ServerName: c.ServerName,
			CAFile: c.CAFile, CAData: c.CAData, CertFile: c.CertFile, CertData: c.CertData, KeyFile: c.KeyFile, KeyData: c.KeyData},
		BearerToken: c.BearerToken, BearerTokenFile: c.BearerTokenFile, Username: c.Username, Password: c.Password,
		QPS: c.QPS, Burst: c.Burst, AuthProvider: c.AuthProvider,
	}
	if c.Exec != nil {
		exec := *c.Exec
		exec.InteractiveMode = clientcmdapi.NeverExecInteractiveMode
		exec.StdinUnavailable = true
		exec.StdinUnavailableMessage = "fleet-agent-deploy reads its request on standard input"
		cfg.ExecProvider = &exec
	}
	return cfg
}
