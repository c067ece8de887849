package targeting

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/framework"
)

// previewBundle is a Helm chart whose values are templated per cluster,
// with a customization for one group and one cluster left out.
var previewBundle = map[string]string{
	"app/Chart.yaml":  "apiVersion: v2\nname: app\nversion: 0.1.0\n",
	"app/values.yaml": "region: none\ntier: bronze\n",
	"app/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\ndata:\n" +
		"  region: {{ .Values.region | quote }}\n  tier: {{ .Values.tier | quote }}\n  cluster: {{ .Values.cluster | quote }}\n",
	"app/fleet.yaml": `defaultNamespace: preview-app
helm:
  values:
    cluster: "${ .ClusterName }"
    region: "${ .ClusterValues.region }"
targetCustomizations:
- name: skip-lab
  clusterSelector: {matchLabels: {env: lab}}
  doNotDeploy: true
- name: gold
  clusterGroup: prod
  helm:
    values:
      tier: gold
- name: everyone
  clusterSelector: {}
`,
}

// previewNS is the workspace of PreviewSpec's clusters and bundle.
const previewNS = "preview-ws"

// preview is what the specs of PreviewSpec share.
type preview struct {
	ctx        context.Context
	admin      client.Client
	kubeconfig string
	dir        string
}

// PreviewSpec checks `fleet target` and `fleet test` against a running
// manager: the BundleDeployments fleet target prints for a bundle are, field
// for field, those the manager writes for it, whether the clusters come from
// the manager or from a file; fleet test prints the resources of one
// cluster with its own templated values. SpecInput.Kubeconfig is required.
// Call it in an Ordered container.
func PreviewSpec(ctx context.Context, inputGetter func() SpecInput) {
	s := &preview{ctx: ctx}
	BeforeAll(func() {
		input := inputGetter()
		input.validate("PreviewSpec")
		Expect(input.Kubeconfig).NotTo(BeEmpty(), "PreviewSpec: SpecInput.Kubeconfig is required")
		s.admin, s.kubeconfig = input.Admin, input.Kubeconfig
		s.dir = GinkgoT().TempDir()
		for name, content := range previewBundle {
			p := filepath.Join(s.dir, filepath.FromSlash(name))
			Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
			Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
		}
		Expect(s.admin.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: previewNS}})).To(Succeed())
		for name, c := range map[string]struct {
			labels map[string]string
			region string
		}{
			"edge-eu": {map[string]string{"env": "prod"}, "eu-west"},
			"edge-us": {map[string]string{"env": "prod"}, "us-east"},
			"dev-1":   {map[string]string{"env": "dev"}, "eu-north"},
			"lab-1":   {map[string]string{"env": "lab"}, "nowhere"},
		} {
			Expect(s.admin.Create(s.ctx, &fleet.Cluster{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: previewNS, Labels: c.labels},
				Spec:       fleet.ClusterSpec{TemplateValues: &fleet.GenericMap{Data: map[string]interface{}{"region": c.region}}},
			})).To(Succeed())
		}
		Expect(s.admin.Create(s.ctx, &fleet.ClusterGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: previewNS},
			Spec:       fleet.ClusterGroupSpec{Selector: selector("env", "prod")},
		})).To(Succeed())
	})

	It("fleet target prints, field for field, the BundleDeployments the manager writes", func() {
		s.fleetCmd("apply", "demo", "app", "-n", previewNS, "-k", s.kubeconfig)
		Eventually(func() []*fleet.BundleDeployment { return s.written() }, 30*time.Second, 100*time.Millisecond).Should(HaveLen(3),
			"the manager's BundleDeployments of demo-app for edge-eu, edge-us and dev-1")
		// The manager writes each BundleDeployment whole, in one create.
		want := s.written()

		out, errOut := s.fleetCmd("target", "--bundle-name", "demo", "app", "-n", previewNS, "-k", s.kubeconfig)
		Expect(errOut).To(ContainSubstring("targets 3 cluster(s)"))
		got := s.printed(out)
		s.sameDeployments(got, want)
		byCluster := map[string]*fleet.BundleDeployment{}
		for _, bd := range got {
			byCluster[bd.Labels[fleet.ClusterLabel]] = bd
		}
		Expect(byCluster).To(HaveKey("edge-eu"))
		Expect(byCluster["edge-eu"].Spec.Options.Helm.Values.Data).To(Equal(map[string]interface{}{
			"cluster": "edge-eu", "region": "eu-west", "tier": "gold"}), "the group's customization over the cluster's templated values")
		Expect(byCluster["dev-1"].Spec.Options.Helm.Values.Data).To(Equal(map[string]interface{}{"cluster": "dev-1", "region": "eu-north"}))

		By("offline: the Bundle from fleet apply -o and the clusters from a file give the same")
		bundleYAML, _ := s.fleetCmd("apply", "demo", "app", "-n", previewNS, "-o", "-")
		Expect(os.WriteFile(filepath.Join(s.dir, "bundle.yaml"), []byte(bundleYAML), 0o644)).To(Succeed())
		clusters, groups := &fleet.ClusterList{}, &fleet.ClusterGroupList{}
		Expect(s.admin.List(s.ctx, clusters, client.InNamespace(previewNS))).To(Succeed())
		Expect(s.admin.List(s.ctx, groups, client.InNamespace(previewNS))).To(Succeed())
		var file bytes.Buffer
		for _, o := range []runtime.Object{clusters, groups} {
			gvks, _, err := s.admin.Scheme().ObjectKinds(o)
			Expect(err).NotTo(HaveOccurred())
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			Expect(err).NotTo(HaveOccurred())
			m["apiVersion"], m["kind"] = gvks[0].GroupVersion().String(), gvks[0].Kind
			for _, item := range m["items"].([]interface{}) {
				obj := item.(map[string]interface{})
				obj["apiVersion"], obj["kind"] = gvks[0].GroupVersion().String(), strings.TrimSuffix(gvks[0].Kind, "List")
			}
			b, err := yaml.Marshal(m)
			Expect(err).NotTo(HaveOccurred())
			file.WriteString("---\n")
			file.Write(b)
		}
		Expect(os.WriteFile(filepath.Join(s.dir, "clusters.yaml"), file.Bytes(), 0o644)).To(Succeed())
		out, _ = s.fleetCmd("target", "-b", "bundle.yaml", "--clusters", "clusters.yaml")
		s.sameDeployments(s.printed(out), want)
	})

	It("fleet test prints the resources a cluster gets, with that cluster's values", func() {
		for cluster, want := range map[string][]string{
			"edge-eu": {`region: eu-west`, `tier: gold`, `cluster: edge-eu`},
			"edge-us": {`region: us-east`, `tier: gold`, `cluster: edge-us`},
			"dev-1":   {`region: eu-north`, `tier: bronze`, `cluster: dev-1`},
		} {
			out, errOut := s.fleetCmd("test", "app", "--bundle-name", "demo", "-n", previewNS, "-k", s.kubeconfig, "-N", cluster)
			Expect(out).To(ContainSubstring("name: demo-app-settings"))
			Expect(out).To(ContainSubstring("namespace: preview-app"))
			for _, w := range want {
				Expect(out).To(ContainSubstring(w), "fleet test -N %s", cluster)
			}
			Expect(errOut).To(ContainSubstring("# Matched: "))
		}
		By("a cluster that is not targeted renders nothing and fails, naming it")
		bin, err := framework.Binary("fleet")
		Expect(err).NotTo(HaveOccurred())
		cmd := exec.CommandContext(s.ctx, bin, "test", "app", "--bundle-name", "demo", "-n", previewNS, "-k", s.kubeconfig, "-N", "lab-1")
		cmd.Dir = s.dir
		out, err := cmd.CombinedOutput()
		Expect(err).To(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("no target of the bundle selects cluster lab-1"))
		Expect(string(out)).NotTo(ContainSubstring("kind: ConfigMap"))
	})
}

// fleet runs the fleet binary in the bundle's directory.
func (s *preview) fleetCmd(args ...string) (stdout, stderr string) {
	GinkgoHelper()
	bin, err := framework.Binary("fleet")
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.CommandContext(s.ctx, bin, args...)
	cmd.Dir = s.dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	Expect(cmd.Run()).To(Succeed(), "fleet %s\n%s", strings.Join(args, " "), errOut.String())
	return out.String(), errOut.String()
}

// printed are the BundleDeployments in fleet target's output, sorted by
// cluster namespace.
func (s *preview) printed(out string) []*fleet.BundleDeployment {
	GinkgoHelper()
	var bds []*fleet.BundleDeployment
	for _, doc := range strings.Split(out, "\n---\n") {
		doc = strings.TrimPrefix(doc, "---\n")
		var tm metav1.TypeMeta
		Expect(yaml.Unmarshal([]byte(doc), &tm)).To(Succeed())
		if tm.Kind != "BundleDeployment" {
			continue
		}
		bd := &fleet.BundleDeployment{}
		Expect(yaml.UnmarshalStrict([]byte(doc), bd)).To(Succeed())
		bds = append(bds, bd)
	}
	sort.Slice(bds, func(i, j int) bool { return bds[i].Namespace < bds[j].Namespace })
	return bds
}

// written are the manager's BundleDeployments of the bundle, sorted by
// cluster namespace.
func (s *preview) written() []*fleet.BundleDeployment {
	GinkgoHelper()
	list := &fleet.BundleDeploymentList{}
	Expect(s.admin.List(s.ctx, list, client.MatchingLabels{fleet.BundleNameLabel: "demo-app", fleet.BundleNamespaceLabel: previewNS})).To(Succeed())
	bds := make([]*fleet.BundleDeployment, 0, len(list.Items))
	for i := range list.Items {
		bds = append(bds, &list.Items[i])
	}
	sort.Slice(bds, func(i, j int) bool { return bds[i].Namespace < bds[j].Namespace })
	return bds
}

// sameDeployments checks that got and want are the same BundleDeployments,
// field for field.
func (s *preview) sameDeployments(got, want []*fleet.BundleDeployment) {
	GinkgoHelper()
	Expect(got).To(HaveLen(len(want)), "one BundleDeployment per targeted cluster")
	for i := range want {
		Expect(got[i].Namespace).To(Equal(want[i].Namespace), "the same cluster namespaces")
		Expect(got[i].Name).To(Equal(want[i].Name))
		Expect(got[i].Labels).To(Equal(want[i].Labels), "labels of %s", want[i].Namespace)
		Expect(got[i].Spec).To(Equal(want[i].Spec), "spec of %s", want[i].Namespace)
	}
}
