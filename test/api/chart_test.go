package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/gitfleet/fleet/config/crd"
	"github.com/gitfleet/fleet/internal/install"
	"github.com/gitfleet/fleet/test/framework"
)

const (
	crdChart     = "../../config/charts/fleet-crd"
	managerChart = "../../config/charts/fleet"
)

// renderChart renders a chart as `helm install --dry-run` (or `helm
// template`) does, through the Helm SDK: values are checked against the
// chart's values.schema.json, templates rendered, hooks and NOTES left out.
func renderChart(dir, namespace string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.ClientOnly, inst.DryRun = true, true
	inst.ReleaseName, inst.Namespace = "fleet", namespace
	rel, err := inst.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	return framework.DecodeYAML([]byte(rel.Manifest))
}

var typedScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	return s
}()

// typed converts a rendered object into its Go type, refusing fields the
// type does not know: a misspelt field in a template fails here, not
// silently on a cluster.
func typed(u *unstructured.Unstructured) (runtime.Object, error) {
	obj, err := typedScheme.New(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return obj, nil
}

func objKey(o client.Object) string {
	return o.GetObjectKind().GroupVersionKind().Kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

// expectSameObjects checks that rendered holds exactly the objects of want,
// each semantically equal (1 and 1.0 CPU are one quantity; an empty
// strategy and none are one strategy).
func expectSameObjects(g Gomega, rendered []*unstructured.Unstructured, want []client.Object, what string) {
	byKey := map[string]client.Object{}
	for _, o := range want {
		byKey[objKey(o)] = o
	}
	got := map[string]bool{}
	for _, u := range rendered {
		obj, err := typed(u)
		g.Expect(err).NotTo(HaveOccurred())
		k := objKey(obj.(client.Object))
		got[k] = true
		w, ok := byKey[k]
		g.Expect(ok).To(BeTrue(), "%s renders %s, which fleet install controller does not print", what, k)
		g.Expect(equality.Semantic.DeepEqual(obj, w)).To(BeTrue(),
			"%s differs from fleet install controller in %s (-chart +install; after a change to config/crd or config/rbac, run `make generate`):\n%s",
			what, k, cmp.Diff(obj, w))
	}
	for k := range byKey {
		g.Expect(got).To(HaveKey(k), "%s lacks %s, which fleet install controller prints", what, k)
	}
}

// dryRunApply applies every object with a server-side dry run, as `kubectl
// apply --server-side --dry-run=server` does. (Unknown fields are refused
// before, by typed.)
func dryRunApply(g Gomega, objs []*unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, u := range objs {
		err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
			client.FieldOwner("helm"), client.ForceOwnership, client.DryRunAll)
		g.Expect(err).NotTo(HaveOccurred(), "the API server refuses %s %s", u.GetKind(), u.GetName())
	}
}

// The fleet-crd chart installs exactly the generated CRDs, and the API
// server accepts them.
func TestCRDChartMatchesGeneratedCRDs(t *testing.T) {
	g := NewWithT(t)
	rendered, err := renderChart(crdChart, "default", nil)
	g.Expect(err).NotTo(HaveOccurred())
	crds, err := crd.CRDs()
	g.Expect(err).NotTo(HaveOccurred())
	want := make([]client.Object, 0, len(crds))
	for _, c := range crds {
		c.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		want = append(want, c)
	}
	g.Expect(rendered).To(HaveLen(len(want)), "fleet-crd renders %d CRDs, config/crd/bases holds %d: run `make generate`", len(rendered), len(want))
	expectSameObjects(g, rendered, want, "the fleet-crd chart")
	dryRunApply(g, rendered)
}

// With default values the fleet chart renders what `fleet install
// controller` prints for the release's namespace (less the Namespace, which
// `helm install --create-namespace` makes), object by object, and a real API
// server accepts it. Images given as values match the CLI's image flags.
func TestManagerChartMatchesInstallController(t *testing.T) {
	cases := []struct {
		name      string
		namespace string
		vals      map[string]any
		opts      install.ControllerOptions
	}{
		{name: "defaults", namespace: "fleet-system"},
		{name: "Fleet's namespace", namespace: "cattle-fleet-system"},
		{
			name:      "images",
			namespace: "cattle-fleet-system",
			vals: map[string]any{
				"image":      map[string]any{"repository": "registry.example.com/fleet/manager", "tag": "v1.2.3"},
				"agentImage": map[string]any{"repository": "registry.example.com/fleet/agent", "tag": "v1.2.3"},
			},
			opts: install.ControllerOptions{
				ControllerImage: "registry.example.com/fleet/manager:v1.2.3",
				AgentImage:      "registry.example.com/fleet/agent:v1.2.3",
			},
		},
		{
			// Names, or Fleet's {name: ...}: `fleet install controller --image-pull-secret`.
			name:      "image pull secrets",
			namespace: "cattle-fleet-system",
			vals:      map[string]any{"imagePullSecrets": []any{"regcred", map[string]any{"name": "mirror"}}},
			opts:      install.ControllerOptions{ImagePullSecrets: []string{"regcred", "mirror"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rendered, err := renderChart(managerChart, tc.namespace, tc.vals)
			g.Expect(err).NotTo(HaveOccurred())
			tc.opts.SystemNamespace = tc.namespace
			objs, err := install.ControllerObjects(tc.opts)
			g.Expect(err).NotTo(HaveOccurred())
			var want []client.Object
			for _, o := range objs {
				if o.GetObjectKind().GroupVersionKind().Kind != "Namespace" {
					want = append(want, o)
				}
			}
			expectSameObjects(g, rendered, want, "the fleet chart")
			ensureNamespace(t, tc.namespace)
			dryRunApply(g, rendered)
		})
	}
}

// Every value the chart documents reaches the Deployment, and what it
// renders is still accepted by the API server.
func TestManagerChartValues(t *testing.T) {
	g := NewWithT(t)
	const ns = "fleet-values"
	rendered, err := renderChart(managerChart, ns, map[string]any{
		"image":                     map[string]any{"imagePullPolicy": "IfNotPresent"},
		"replicas":                  3,
		"leaderElection":            map[string]any{"leaseDuration": "30s"},
		"metrics":                   map[string]any{"enabled": false, "perObject": map[string]any{"enabled": true, "maxSeries": 500}},
		"agentTLSMode":              "system-store",
		"garbageCollectionInterval": "30m",
		"webhook":                   map[string]any{"port": 9443, "secretName": "webhook", "secretKey": "token"},
		"dashboard":                 map[string]any{"enabled": true, "port": 8091},
		"notifications":             map[string]any{"enabled": false},
		"apiServerURL":              "https://manager.example.com:6443",
		"apiServerCA":               "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
		"bootstrap":                 map[string]any{"enabled": false},
		"resources":                 map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}, "limits": nil},
		"nodeSelector":              map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":               []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}},
		"extraArgs":                 []any{"--workers=8", "--kubeconfig-secret-namespaces=capi-system"},
		"agentUpgrade":              map[string]any{"enabled": false, "maxUnavailable": "25%"},
		"clusterAPI":                map[string]any{"clusterSelector": "fleet.cattle.io/enroll=true", "namespaceSelector": "team in (a,b)"},
		"extraEnv":                  []any{map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"}},
	})
	g.Expect(err).NotTo(HaveOccurred())

	var dep *appsv1.Deployment
	kinds := map[string]bool{}
	for _, u := range rendered {
		obj, err := typed(u)
		g.Expect(err).NotTo(HaveOccurred())
		kinds[u.GetKind()+"/"+u.GetName()] = true
		if d, ok := obj.(*appsv1.Deployment); ok {
			dep = d
		}
	}
	g.Expect(dep).NotTo(BeNil())
	// bootstrap.enabled=false leaves out the local agent's cluster-admin binding.
	g.Expect(kinds).NotTo(HaveKey("ClusterRoleBinding/fleet-agent-" + ns))
	g.Expect(kinds).NotTo(HaveKey("ServiceAccount/fleet-agent"))
	g.Expect(kinds).To(HaveKey("ConfigMap/fleet-manager-api-server-ca"))

	g.Expect(*dep.Spec.Replicas).To(Equal(int32(3)))
	pod := dep.Spec.Template.Spec
	g.Expect(pod.NodeSelector).To(HaveKeyWithValue("kubernetes.io/os", "linux"))
	g.Expect(pod.Tolerations).To(HaveLen(1))
	c := pod.Containers[0]
	g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent))
	g.Expect(c.Args).To(ContainElements(
		"--leader-elect", "--leader-elect-lease-duration=30s", "--system-namespace="+ns,
		"--metrics-bind-address=0", "--webhook-bind-address=:9443",
		"--api-server-url=https://manager.example.com:6443", "--api-server-ca-file=/etc/fleet/api-server-ca/ca.crt",
		"--webhook-secret-file=/etc/fleet/webhook/token", "--local-cluster=false",
		"--workers=8", "--kubeconfig-secret-namespaces=capi-system",
		"--agent-bundles=false", "--agent-max-unavailable=25%",
		"--capi-cluster-selector=fleet.cattle.io/enroll=true", "--capi-namespace-selector=team in (a,b)",
		"--agent-tls-mode=system-store", "--agent-garbage-collection-interval=30m",
		"--per-object-metrics", "--per-object-metrics-max-series=500",
		"--dashboard-bind-address=:8091", "--notifications=false"))
	g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy.example.com:3128"}))
	portNames := make([]string, 0, len(c.Ports))
	for _, p := range c.Ports {
		portNames = append(portNames, p.Name)
	}
	g.Expect(portNames).To(Equal([]string{"health", "webhook", "dashboard"}), "metrics disabled: no metrics port")
	g.Expect(c.Resources.Requests.Cpu().String()).To(Equal("1"))
	g.Expect(c.Resources.Limits).To(BeEmpty(), "limits: null drops the default limit, as Helm merges values")

	ensureNamespace(t, ns)
	dryRunApply(g, rendered)
}

// A mistyped or ill-typed value is refused before anything is rendered, with
// a message naming the value.
func TestManagerChartRejectsBadValues(t *testing.T) {
	cases := []struct {
		name string
		vals map[string]any
		want string
	}{
		{"unknown value", map[string]any{"replica": 3}, "replica"},
		{"replicas not a number", map[string]any{"replicas": "two"}, "replicas"},
		{"plain http API server", map[string]any{"apiServerURL": "http://manager:6443"}, "apiServerURL"},
		{"bad lease duration", map[string]any{"leaderElection": map[string]any{"leaseDuration": "thirty"}}, "leaseDuration"},
		{"extra arg not a flag", map[string]any{"extraArgs": []any{"workers=8"}}, "extraArgs"},
		{"max unavailable not a number or percentage", map[string]any{"agentUpgrade": map[string]any{"maxUnavailable": "ten"}}, "maxUnavailable"},
		{"unknown agent TLS mode", map[string]any{"agentTLSMode": "lax"}, "agentTLSMode"},
		{"bad garbage collection interval", map[string]any{"garbageCollectionInterval": "daily"}, "garbageCollectionInterval"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := renderChart(managerChart, "fleet-system", tc.vals)
			g.Expect(err).To(HaveOccurred())
			t.Log(err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
			g.Expect(strings.ToLower(err.Error())).To(ContainSubstring("schema"))
		})
	}
}

// `helm lint` finds nothing to warn about in either chart.
func TestChartsLint(t *testing.T) {
	for _, dir := range []string{crdChart, managerChart} {
		g := NewWithT(t)
		l := lint.All(dir, nil, "cattle-fleet-system", false)
		for _, m := range l.Messages {
			g.Expect(m.Severity).To(BeNumerically("<", support.WarningSev), "helm lint %s: %s", dir, m)
		}
	}
}
