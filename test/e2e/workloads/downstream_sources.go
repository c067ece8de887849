package workloads

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/chartrepo"
)

// The reader chart deploys an app whose container takes its environment
// from the copied Secret and ConfigMap (their names are values), and a
// ConfigMap "reader-values" rendering the value greeting, which the specs
// take with valuesFrom from a third copied ConfigMap.
const (
	readerDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: reader
spec:
  replicas: 1
  selector:
    matchLabels: {app: reader}
  template:
    metadata:
      labels: {app: reader}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        envFrom:
        - secretRef: {name: {{ .Values.secretName }}}
        - configMapRef: {name: {{ .Values.configMapName }}}
`
	readerValuesConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: reader-values
data:
  greeting: {{ .Values.greeting | quote }}
`
	readerValues = "secretName: none\nconfigMapName: none\ngreeting: none\n"
)

func readerChart() chartrepo.Chart {
	return chartrepo.Chart{Name: "reader", Version: "1.0.0", Values: readerValues,
		Templates: map[string]string{"deploy.yaml": readerDeployment, "values.yaml": readerValuesConfigMap}}
}

// sources are one spec's source objects in the workspace: the Secret and
// ConfigMap the app reads (copySet names them) and the ConfigMap its
// values come from.
type sources struct {
	copySet
	values string
}

// create makes the sources, the Secret holding password, and removes them
// after the spec.
func (s sources) create(f *fixture, password, greeting, valuesGreeting string) {
	GinkgoHelper()
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: s.secret}, Data: map[string][]byte{"password": []byte(password)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: s.configMap}, Data: map[string]string{"greeting": greeting}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: s.values}, Data: map[string]string{"values.yaml": "greeting: " + valuesGreeting + "\n"}},
	}
	for _, o := range objs {
		Expect(f.admin.Create(f.ctx, o)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(f.admin.Delete(f.ctx, o))).To(Succeed()) })
	}
}

// downstreamResources names the three sources, as a HelmOp or fleet.yaml
// writes them.
func (s sources) downstreamResources() []fleet.DownstreamResource {
	return []fleet.DownstreamResource{{Kind: "Secret", Name: s.secret}, {Kind: "ConfigMap", Name: s.configMap}, {Kind: "ConfigMap", Name: s.values}}
}

// change rewrites the Secret's password and the values' greeting at the
// source.
func (s sources) change(f *fixture, password, valuesGreeting string) {
	GinkgoHelper()
	Eventually(func() error {
		sec := &corev1.Secret{}
		if err := f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: s.secret}, sec); err != nil {
			return err
		}
		sec.Data["password"] = []byte(password)
		return f.admin.Update(f.ctx, sec)
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	Eventually(func() error {
		cm := &corev1.ConfigMap{}
		if err := f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: s.values}, cm); err != nil {
			return err
		}
		cm.Data["values.yaml"] = "greeting: " + valuesGreeting + "\n"
		return f.admin.Update(f.ctx, cm)
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
}

// waitDeployed waits until the cluster has the copies, runs the app reading
// them, and rendered greeting from the values copy.
func (c *cluster) waitDeployed(s sources, bundle, password, greeting, valuesGreeting string) {
	GinkgoHelper()
	c.waitState(bundle, fleet.Ready, 90*time.Second)
	c.waitCopies(s.copySet, password, greeting)
	runningApp(c, s.ns, "reader")
	Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(c.Local.Get(c.ctx, types.NamespacedName{Namespace: s.ns, Name: "reader-values"}, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("greeting", valuesGreeting), "on %s", c.name)
	}, 60*time.Second, 250*time.Millisecond).Should(Succeed(), "the chart's values from the copied ConfigMap on %s; agent log:\n%s", c.name, c.Agent.Tail(4000))
}

// waitUninstalled waits until the cluster has neither the copies nor the
// app.
func (c *cluster) waitUninstalled(s sources, bundle string) {
	GinkgoHelper()
	Eventually(func() *fleet.BundleDeployment { return c.bd(bundle) }, 60*time.Second, 250*time.Millisecond).Should(BeNil())
	c.waitNoCopies(s.copySet)
	Eventually(func() bool {
		return apierrors.IsNotFound(c.Local.Get(c.ctx, types.NamespacedName{Namespace: s.ns, Name: s.values}, &corev1.ConfigMap{}))
	}, 60*time.Second, 250*time.Millisecond).Should(BeTrue(), "the values copy gone from %s", c.name)
}

// sourcesFollowed is what the HelmOp and the GitRepo specs share once their
// bundle deploys to both clusters: the source changes reach both (the
// copies, and the release rendered again with the new values), the value is
// nowhere upstream, one agent cannot open the other's seal, un-targeting
// c1 removes its copies, and with keepResources un-targeting c0 keeps them.
func sourcesFollowed(f *fixture, s sources, bundle, password string, retarget func(names ...string), keep func()) {
	GinkgoHelper()
	c0, c1 := f.clusters[0], f.clusters[1]
	password2 := password + "-rotated"
	s.change(f, password2, "changed")
	for _, c := range f.clusters {
		c.waitDeployed(s, bundle, password2, "hello", "changed")
	}

	f.valueNowhere(password2, types.NamespacedName{Namespace: ws, Name: s.secret}, bundle)
	f.otherAgentCannotOpen(c0, c1, bundle, 3)

	retarget(c0.name)
	c1.waitUninstalled(s, bundle)
	c0.waitDeployed(s, bundle, password2, "hello", "changed")

	keep()
	Eventually(func() bool { bd := c0.bd(bundle); return bd != nil && bd.Spec.Options.KeepResources }, 60*time.Second, 250*time.Millisecond).
		Should(BeTrue(), "keepResources reaches %s's BundleDeployment", c0.name)
	c0.waitState(bundle, fleet.Ready, 60*time.Second)
	retarget()
	Eventually(func() *fleet.BundleDeployment { return c0.bd(bundle) }, 60*time.Second, 250*time.Millisecond).Should(BeNil())
	Consistently(func(g Gomega) { c0.copiesAre(g, s.copySet, password2, "hello") }, 5*time.Second, time.Second).Should(Succeed())
}

// targetNames targets the clusters named, none when no name is given.
func targetNames(names ...string) []fleet.BundleTarget {
	if len(names) == 0 {
		return targetName("nobody")
	}
	return targetName(names[0])
}

// downstreamHelmOp: a HelmOp deploying a chart from a chart repository on
// loopback names its Secret and ConfigMaps in spec.downstreamResources; its
// values come, through valuesFrom naming the source's own (upstream)
// namespace as the Rancher UI writes it, from the copy.
func downstreamHelmOp(f *fixture) {
	repo, err := chartrepo.New([]chartrepo.Chart{readerChart()}, chartrepo.Options{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(repo.Close)
	s := sources{copySet: copySet{ns: "helmop-secrets", secret: "op-db", configMap: "op-settings"}, values: "op-values"}
	password := fmt.Sprintf("op-%d-never-in-plain-text", time.Now().UnixNano())
	s.create(f, password, "hello", "from-the-copy")

	op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "helmop-secrets", Namespace: ws}}
	op.Spec.Helm = &fleet.HelmOptions{Repo: repo.URL, Chart: "reader", Version: "1.0.0", ReleaseName: "reader",
		Values: &fleet.GenericMap{Data: map[string]interface{}{"secretName": s.secret, "configMapName": s.configMap}},
		ValuesFrom: []fleet.ValuesFrom{{ConfigMapKeyRef: &fleet.ConfigMapKeySelector{
			Name: s.values, Namespace: ws, Key: "values.yaml"}}}}
	op.Spec.DefaultNamespace, op.Spec.CreateNamespace = s.ns, ptr.To(true)
	op.Spec.DownstreamResources = s.downstreamResources()
	op.Spec.Targets = targetAll()
	Expect(f.admin.Create(f.ctx, op)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(f.admin.Delete(f.ctx, op))).To(Succeed()) })
	for _, c := range f.clusters {
		c.waitDeployed(s, op.Name, password, "hello", "from-the-copy")
	}

	update := func(change func(*fleet.HelmOp)) {
		GinkgoHelper()
		Eventually(func() error {
			got := &fleet.HelmOp{}
			if err := f.admin.Get(f.ctx, client.ObjectKeyFromObject(op), got); err != nil {
				return err
			}
			change(got)
			return f.admin.Update(f.ctx, got)
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	}
	sourcesFollowed(f, s, op.Name, password,
		func(names ...string) { update(func(o *fleet.HelmOp) { o.Spec.Targets = targetNames(names...) }) },
		func() { update(func(o *fleet.HelmOp) { o.Spec.KeepResources = true }) })
}

// downstreamGitRepo: a GitRepo whose fleet.yaml deploys a chart of the
// repository and names its Secret and ConfigMaps in downstreamResources,
// its values from the copy through valuesFrom.
func downstreamGitRepo(f *fixture) {
	s := sources{copySet: copySet{ns: "gitrepo-secrets", secret: "gr-db", configMap: "gr-settings"}, values: "gr-values"}
	password := fmt.Sprintf("gr-%d-never-in-plain-text", time.Now().UnixNano())
	s.create(f, password, "hello", "from-the-copy")

	root, err := os.MkdirTemp("", "fleet-e2e-downstream-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, root)
	const repoName = "downstream-secrets"
	repo, err := gittest.NewRepo(filepath.Join(root, repoName), "main")
	Expect(err).NotTo(HaveOccurred())
	_, err = repo.Commit("an app reading secrets", map[string]string{
		"app/fleet.yaml": fmt.Sprintf(`defaultNamespace: %[1]s
helm:
  chart: ./chart
  releaseName: reader
  values:
    secretName: %[2]s
    configMapName: %[3]s
  valuesFrom:
  - configMapKeyRef:
      name: %[4]s
      namespace: %[5]s
      key: values.yaml
downstreamResources:
- kind: Secret
  name: %[2]s
- kind: ConfigMap
  name: %[3]s
- kind: ConfigMap
  name: %[4]s
`, s.ns, s.secret, s.configMap, s.values, ws),
		"app/chart/Chart.yaml":            "apiVersion: v2\nname: reader\nversion: 1.0.0\n",
		"app/chart/values.yaml":           readerValues,
		"app/chart/templates/deploy.yaml": readerDeployment,
		"app/chart/templates/values.yaml": readerValuesConfigMap,
	})
	Expect(err).NotTo(HaveOccurred())
	git := gittest.NewServer(root)
	DeferCleanup(git.Close)

	gr := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: repoName, Namespace: ws},
		Spec: fleet.GitRepoSpec{Repo: git.RepoURL(repoName), Branch: "main", Paths: []string{"app"},
			PollingInterval: &metav1.Duration{Duration: 2 * time.Second}, Targets: []fleet.GitTarget{{Name: "all",
				ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"workloads": "true"}}}}}}
	Expect(f.admin.Create(f.ctx, gr)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(f.admin.Delete(f.ctx, gr))).To(Succeed()) })

	var bundle string
	Eventually(func(g Gomega) {
		list := &fleet.BundleList{}
		g.Expect(f.admin.List(f.ctx, list, client.InNamespace(ws), client.MatchingLabels{fleet.RepoLabel: repoName})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		g.Expect(list.Items[0].Spec.DownstreamResources).To(Equal(s.downstreamResources()), "fleet.yaml's downstreamResources on the Bundle")
		bundle = list.Items[0].Name
	}, 90*time.Second, 250*time.Millisecond).Should(Succeed(), "the GitRepo's bundle")
	for _, c := range f.clusters {
		c.waitDeployed(s, bundle, password, "hello", "from-the-copy")
	}

	update := func(change func(*fleet.GitRepo)) {
		GinkgoHelper()
		Eventually(func() error {
			got := &fleet.GitRepo{}
			if err := f.admin.Get(f.ctx, client.ObjectKeyFromObject(gr), got); err != nil {
				return err
			}
			change(got)
			return f.admin.Update(f.ctx, got)
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	}
	sourcesFollowed(f, s, bundle, password,
		func(names ...string) {
			update(func(g *fleet.GitRepo) {
				t := targetNames(names...)[0]
				g.Spec.Targets = []fleet.GitTarget{{Name: t.Name, ClusterSelector: t.ClusterSelector}}
			})
		},
		func() { update(func(g *fleet.GitRepo) { g.Spec.KeepResources = true }) })
}
