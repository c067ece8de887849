package agentmanifest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// ReadBootstrap reads a fleet-agent-bootstrap Secret as the agent sees it.
func ReadBootstrap(s *corev1.Secret) (*Bootstrap, error) {
	get := func(k string) string {
		if v, ok := s.StringData[k]; ok {
			return v
		}
		return string(s.Data[k])
	}
	b := &Bootstrap{
		APIServerURL:                get(BootstrapAPIServerURLKey),
		APIServerCA:                 get(BootstrapAPIServerCAKey),
		Token:                       get(BootstrapTokenKey),
		ClusterNamespace:            get(BootstrapClusterNamespaceKey),
		SystemRegistrationNamespace: get(BootstrapSystemRegistrationNamespaceKey),
		TokenName:                   get(BootstrapTokenNameKey),
	}
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return b, nil
}

// ReadConfig reads the fleet-agent ConfigMap; nil gives an empty config.
func ReadConfig(cm *corev1.ConfigMap) (*AgentConfig, error) {
	c := &AgentConfig{}
	if cm == nil || cm.Data[ConfigKey] == "" {
		return c, nil
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data[ConfigKey]), c); err != nil {
		return nil, fmt.Errorf("configmap %s/%s key %q: %w", cm.Namespace, cm.Name, ConfigKey, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("configmap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return c, nil
}
