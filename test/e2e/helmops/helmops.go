package helmops

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/bundlereader"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/chartrepo"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// SpecInput is what HelmOpsSpec runs against.
type SpecInput struct {
	// Upstream is the manager's control plane, the manager running on it.
	Upstream *controlplane.ControlPlane
	// Downstreams are two bare control planes that join it: dev and prod.
	Downstreams []*controlplane.ControlPlane
	// Admin is an admin client of Upstream, with the manager's scheme.
	Admin client.Client
	// LogDir receives the agents' logs.
	LogDir string
}

const (
	ws = fleet.DefaultWorkspace
	// marker is in the chart's ConfigMap only: no object of the manager
	// may hold it.
	marker = "chart-bytes-marker-7f3a"
)

func webChart(version string) chartrepo.Chart {
	return chartrepo.Chart{Name: "web", Version: version, Values: "greeting: hello\n",
		Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  version: " +
			version + "\n  greeting: {{ .Values.greeting }}\n  marker: " + marker + "\n"}}
}

// HelmOpsSpec joins two clusters, dev and prod, and deploys a HelmOp from
// an HTTPS chart repository that requires basic auth. Call it in an
// Ordered container.
func HelmOpsSpec(ctx context.Context, inputGetter func() SpecInput) {
	var (
		admin     client.Client
		dev, prod *e2e.JoinedCluster
		repo      *chartrepo.Repo
	)
	BeforeAll(func() {
		in := inputGetter()
		Expect(in.Downstreams).To(HaveLen(2), "HelmOpsSpec needs two downstream control planes")
		admin = in.Admin
		join := func(cp *controlplane.ControlPlane, env string) *e2e.JoinedCluster {
			return e2e.Join(ctx, e2e.JoinInput{Upstream: in.Upstream, Downstream: cp, Admin: admin, LogDir: in.LogDir,
				AgentArgs:  []string{"--checkin-interval", "5s", "--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "30s"},
				ConfigArgs: []string{"-l", "env=" + env}}, 90*time.Second)
		}
		dev, prod = join(in.Downstreams[0], "dev"), join(in.Downstreams[1], "prod")
		DeferCleanup(func() { dev.StopAgents(); prod.StopAgents() })

		var err error
		repo, err = chartrepo.New([]chartrepo.Chart{webChart("1.0.0"), webChart("1.1.0"), webChart("2.0.0")},
			chartrepo.Options{TLS: true, Username: "tenant", Password: "helm-s3cret"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(repo.Close)
	})

	bdOf := func(j *e2e.JoinedCluster, name string) *fleet.BundleDeployment {
		bd := &fleet.BundleDeployment{}
		err := admin.Get(ctx, types.NamespacedName{Namespace: j.Cred.ClusterNamespace, Name: name}, bd)
		if apierrors.IsNotFound(err) {
			return nil
		}
		Expect(err).NotTo(HaveOccurred())
		return bd
	}
	secret := func(name, password string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{"username": []byte("tenant"), "password": []byte(password), "cacerts": repo.CA}}
	}
	envTarget := func(env string) fleet.BundleTarget {
		return fleet.BundleTarget{Name: env, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": env}}}
	}

	It("deploys the chart on both clusters, each agent downloading it with its own copy of the Secret", func() {
		Expect(admin.Create(ctx, secret("repo-creds", "helm-s3cret"))).To(Succeed())
		op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "pulled", Namespace: ws}}
		op.Spec.Helm = &fleet.HelmOptions{Repo: repo.URL, Chart: "web", Version: "1.x", ReleaseName: "web"}
		op.Spec.DefaultNamespace = "default"
		op.Spec.HelmSecretName = "repo-creds"
		op.Spec.Targets = []fleet.BundleTarget{envTarget("dev"), envTarget("prod")}
		Expect(admin.Create(ctx, op)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(admin.Delete(ctx, op))).To(Succeed()) })

		bds := map[*e2e.JoinedCluster]*fleet.BundleDeployment{}
		for _, j := range []*e2e.JoinedCluster{dev, prod} {
			e2e.WaitFor("BundleDeployment pulled Ready on "+j.Downstream.Name, func(g Gomega) {
				bd := bdOf(j, "pulled")
				g.Expect(bd).NotTo(BeNil())
				g.Expect(summary.State(bd)).To(Equal(fleet.Ready), "%s\nagent log:\n%s", summary.Message(bd), j.Agent.Tail(4000))
				bds[j] = bd
			}, 3*time.Minute, 250*time.Millisecond)
			cm := &corev1.ConfigMap{}
			Expect(j.Local.Get(ctx, types.NamespacedName{Namespace: "default", Name: "web"}, cm)).To(Succeed())
			Expect(cm.Data).To(HaveKeyWithValue("version", "1.1.0"), "the version the HelmOp resolved, on every cluster")
			Expect(cm.Data).To(HaveKeyWithValue("greeting", "hello"))
		}
		_, auths := repo.Requests()
		Expect(auths).NotTo(BeEmpty(), "the repository was asked with the credentials")

		By("the Bundle names the chart and Fleet's helmOpOptions, and no Content of the manager holds the chart")
		b := &fleet.Bundle{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: "pulled"}, b)).To(Succeed())
		Expect(b.Spec.Resources).To(BeEmpty())
		Expect(b.Spec.ContentsID).To(BeEmpty())
		Expect(b.Spec.Helm.Version).To(Equal("1.1.0"))
		Expect(b.Spec.HelmOpOptions).To(Equal(&fleet.BundleHelmOptions{SecretName: "repo-creds"}))
		contents := &fleet.ContentList{}
		Expect(admin.List(ctx, contents)).To(Succeed())
		for i := range contents.Items {
			files, err := content.Decode(&contents.Items[i])
			Expect(err).NotTo(HaveOccurred())
			for _, f := range files {
				data, err := bundlereader.DecodeResource(f)
				Expect(err).NotTo(HaveOccurred())
				Expect(string(data)).NotTo(ContainSubstring(marker), "Content %s holds the chart", contents.Items[i].Name)
			}
		}
		for j, bd := range bds {
			Expect(bd.Spec.HelmChartOptions).To(Equal(&fleet.BundleHelmOptions{SecretName: "pulled"}))
			Expect(bd.Spec.DeploymentID).To(HavePrefix(":"), "no Content")
			copyOf := &corev1.Secret{}
			Expect(admin.Get(ctx, types.NamespacedName{Namespace: j.Cred.ClusterNamespace, Name: "pulled"}, copyOf)).To(Succeed())
			Expect(copyOf.Type).To(Equal(corev1.SecretType(fleet.HelmOpsAccessSecretType)))
			Expect(copyOf.OwnerReferences).To(ConsistOf(HaveField("UID", bd.UID)))
		}

		By("dev's agent reads its own copy, and is refused prod's")
		devAgent := dev.CredClient()
		Expect(devAgent.Get(ctx, types.NamespacedName{Namespace: dev.Cred.ClusterNamespace, Name: "pulled"}, &corev1.Secret{})).To(Succeed())
		err := devAgent.Get(ctx, types.NamespacedName{Namespace: prod.Cred.ClusterNamespace, Name: "pulled"}, &corev1.Secret{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "dev's agent reading prod's chart Secret: %v", err)
		err = devAgent.Get(ctx, types.NamespacedName{Namespace: ws, Name: "repo-creds"}, &corev1.Secret{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "dev's agent reading the HelmOp's own Secret: %v", err)

		By("deleting the HelmOp deletes the copies")
		Expect(admin.Delete(ctx, op)).To(Succeed())
		for _, j := range []*e2e.JoinedCluster{dev, prod} {
			e2e.WaitFor("the chart Secret copy gone from "+j.Downstream.Name, func(g Gomega) {
				err := admin.Get(ctx, types.NamespacedName{Namespace: j.Cred.ClusterNamespace, Name: "pulled"}, &corev1.Secret{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
			}, time.Minute, 250*time.Millisecond)
		}
	})

	It("shows a failed download on the BundleDeployment, naming the repository and what to check", func() {
		Expect(admin.Create(ctx, secret("stale-creds", "expired"))).To(Succeed())
		// Written as the HelmOp controller writes it: a Bundle with
		// helmOpOptions and an exact version; only the agent uses the
		// credentials, and they are wrong.
		b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "stale", Namespace: ws}, Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "default",
				Helm: &fleet.HelmOptions{Repo: repo.URL, Chart: "web", Version: "1.0.0", ReleaseName: "stale"}},
			HelmOpOptions: &fleet.BundleHelmOptions{SecretName: "stale-creds"},
			Targets:       []fleet.BundleTarget{envTarget("dev")},
		}}
		Expect(admin.Create(ctx, b)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(admin.Delete(ctx, b))).To(Succeed()) })
		e2e.WaitFor("BundleDeployment stale not ready with ChartDownloadFailed", func(g Gomega) {
			bd := bdOf(dev, "stale")
			g.Expect(bd).NotTo(BeNil())
			c := conditions.Get(bd, fleet.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(fleet.ReasonChartDownloadFailed))
			g.Expect(c.Message).To(And(ContainSubstring("from "+repo.URL), ContainSubstring("401"),
				ContainSubstring("helmSecretName"), ContainSubstring(dev.Cred.ClusterNamespace+"/stale")))
			g.Expect(strings.Contains(c.Message, "expired")).To(BeFalse(), "no password in the message")
		}, 2*time.Minute, 250*time.Millisecond)
	})
}
