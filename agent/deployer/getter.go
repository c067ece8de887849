package deployer

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// restClientGetter hands Helm a REST config, and the agent's shared cached
// discovery and REST mapper, without any kubeconfig file.
type restClientGetter struct {
	config    *rest.Config
	namespace string
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.RESTMapper
}

// ToRESTConfig returns a copy of the config, since Helm may change it.
func (g *restClientGetter) ToRESTConfig() (*rest.Config, error) {
	return rest.CopyConfig(g.config), nil
}

func (g *restClientGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.discovery, nil
}

func (g *restClientGetter) ToRESTMapper() (meta.RESTMapper, error) {
	return g.mapper, nil
}

// ToRawKubeConfigLoader only supplies the default namespace: Helm's clients
// come from ToRESTConfig.
func (g *restClientGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), &clientcmd.ConfigOverrides{
		Context: clientcmdapi.Context{Namespace: g.namespace},
	})
}

// openAPIPerDeploy is the shared cached discovery with the OpenAPI documents
// left out of its cache. Helm validates what it builds by first asking whether
// the API server validates fields itself, which reads the OpenAPI v3 document
// of each group-version deployed (1.6 MB for core/v1 alone). Helm invalidates
// discovery at each install or upgrade, but the shared cache would keep the
// last deploy's documents while the agent is idle, for nothing: Helm's client
// keeps them for the deploy that asked.
type openAPIPerDeploy struct {
	discovery.CachedDiscoveryInterface
	direct discovery.DiscoveryInterface
}

// OpenAPIV3 returns an OpenAPI client of its own, not the shared cache's.
func (d openAPIPerDeploy) OpenAPIV3() openapi.Client { return d.direct.OpenAPIV3() }
