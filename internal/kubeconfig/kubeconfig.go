// Package kubeconfig turns REST configs into kubeconfig files and back. Tests, the
// local development loop and the agent installer all need to hand a cluster's
// address and credentials to another process in the one format every tool reads.
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FromREST renders cfg as a kubeconfig with a single context called name.
// Certificate, key and CA are inlined so the file stands on its own.
func FromREST(cfg *rest.Config, name string) ([]byte, error) {
	if cfg == nil || cfg.Host == "" {
		return nil, fmt.Errorf("cannot write a kubeconfig for %q: the REST config has no host", name)
	}
	auth := &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		Username:              cfg.Username,
		Password:              cfg.Password,
	}
	c := clientcmdapi.NewConfig()
	c.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	c.AuthInfos[name] = auth
	c.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	c.CurrentContext = name
	return clientcmd.Write(*c)
}

// ToREST parses a kubeconfig and returns the REST config of its current context.
// It refuses kubeconfigs that run external programs (exec or auth-provider
// plugins): a kubeconfig read from a Secret must never make this process execute
// something a Secret author chose.
func ToREST(data []byte) (*rest.Config, error) {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig is not valid YAML: %w", err)
	}
	for name, ai := range raw.AuthInfos {
		if ai.Exec != nil {
			return nil, fmt.Errorf("kubeconfig user %q uses an exec plugin (%s); use a token or client certificate instead", name, ai.Exec.Command)
		}
		if ai.AuthProvider != nil {
			return nil, fmt.Errorf("kubeconfig user %q uses auth provider %q; use a token or client certificate instead", name, ai.AuthProvider.Name)
		}
		if ai.TokenFile != "" || ai.ClientCertificate != "" || ai.ClientKey != "" {
			return nil, fmt.Errorf("kubeconfig user %q refers to files on disk; inline the credentials", name)
		}
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig is incomplete: %w", err)
	}
	return cfg, nil
}

// Load reads a kubeconfig from path, or else from $KUBECONFIG, ~/.kube/config
// or the in-cluster service account, in that order.
func Load(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err == nil {
		return cfg, nil
	}
	if path == "" {
		if in, inErr := rest.InClusterConfig(); inErr == nil {
			return in, nil
		}
	}
	return nil, fmt.Errorf("loading kubeconfig: %w", err)
}
