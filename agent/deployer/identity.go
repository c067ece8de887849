package deployer

import (
	"bytes"
	"fmt"
	"io"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// identity is who the agent acts as for one release: itself, or the
// bundle's serviceAccount. With a serviceAccount every write and every read
// a bundle chooses (objects, hooks, CRDs, release records, valuesFrom,
// the release namespace, drift correction, uninstall) goes through the
// downstream API server as that account, so its RBAC is the bundle's limit.
type identity struct {
	// serviceAccount is "" for the agent itself.
	serviceAccount string
	config         *rest.Config
	core           corev1client.CoreV1Interface
	client         client.Client
}

// as returns the identity of a release in namespace deployed with
// serviceAccount (the agent's own when empty). The account lives in the
// release namespace.
func (d *Deployer) as(namespace, serviceAccount string) (*identity, error) {
	if serviceAccount == "" {
		return &identity{config: d.config, core: d.core, client: d.client}, nil
	}
	cfg := rest.CopyConfig(d.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: release.ServiceAccountUser(namespace, serviceAccount)}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: d.client.Scheme(), Mapper: d.mapper})
	if err != nil {
		return nil, err
	}
	return &identity{serviceAccount: serviceAccount, config: cfg, core: core, client: c}, nil
}

func (id *identity) storage(namespace string) *storage.Storage {
	return storage.Init(driver.NewSecrets(id.core.Secrets(namespace)))
}

// confinedKube is Helm's Kubernetes client with every manifest Helm builds
// (templates, hooks, CRDs, the previous release's) put into the forced
// namespace first. Helm's post-renderer sees only the templates; this makes hooks obey
// a forced namespace too. The first violation is kept so that the failure
// can be reported with its own reason, whatever Helm wraps it in.
type confinedKube struct {
	*kube.Client
	namespace string
	scope     Scope
	violation error
}

// Build implements kube.Interface.
func (c *confinedKube) Build(r io.Reader, validate bool) (kube.ResourceList, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	out, err := ForceNamespaceManifests(data, c.namespace, c.scope)
	if err != nil {
		if c.violation == nil {
			c.violation = err
		}
		return nil, err
	}
	return c.Client.Build(bytes.NewReader(out), validate)
}

// checkCRDs refuses a chart that brings CRDs (crds/, its own or a
// subchart's) when the bundle forces a namespace: CRDs are cluster-scoped,
// and Helm installs them without any post-rendering.
func checkCRDs(ch *chart.Chart, forceNamespace string) error {
	if forceNamespace == "" {
		return nil
	}
	if crds := ch.CRDObjects(); len(crds) > 0 {
		return outcome.Stallf(fleet.ReasonNamespaceViolation,
			"the chart installs CRDs (%s), which are cluster-scoped, but the bundle's namespace option %q confines it to one namespace: remove crds/ from the chart or the namespace option",
			crds[0].Filename, forceNamespace)
	}
	return nil
}

// namespaceViolation is the Stalling error for a manifest Helm built that
// broke the forced namespace, or nil.
func (c *confinedKube) namespaceViolation() error {
	if c == nil || c.violation == nil {
		return nil
	}
	return outcome.Stall(fleet.ReasonNamespaceViolation, fmt.Errorf("%w: remove it from the chart or the namespace option", c.violation))
}
