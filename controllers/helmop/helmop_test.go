package helmop_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/chartrepo"
)

func yamlUnmarshal(data []byte, v any) error { return yaml.Unmarshal(data, v) }

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {version: %q}\n"

func appChart(version string) chartrepo.Chart {
	return chartrepo.Chart{Name: "app", Version: version, Values: "replicas: 1\n",
		Templates: map[string]string{"cm.yaml": fmt.Sprintf(configMap, version)}}
}

func newRepo(t *testing.T, o chartrepo.Options, versions ...string) *chartrepo.Repo {
	t.Helper()
	charts := make([]chartrepo.Chart, 0, len(versions))
	for _, v := range versions {
		charts = append(charts, appChart(v))
	}
	repo, err := chartrepo.New(charts, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(repo.Close)
	return repo
}

func newHelmOp(ns, name string, helm fleet.HelmOptions) *fleet.HelmOp {
	op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	op.Spec.Helm = &helm
	return op
}

func TestHelmOpResolvesTheConstraintAndWritesTheBundle(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := newRepo(t, chartrepo.Options{}, "1.0.0", "1.1.0", "2.0.0")

	op := newHelmOp(ns, "app", fleet.HelmOptions{Repo: repo.URL, Chart: "app", Version: "1.x", ReleaseName: "my-app"})
	op.Spec.Labels = map[string]string{"team": "blue"}
	op.Spec.DefaultNamespace = "apps"
	g.Expect(env.Create(ctx, op)).To(Succeed())

	g.Eventually(bundleChartVersion(g, ns, "app", "app")).WithTimeout(eventually).WithPolling(poll).Should(Equal("1.1.0"), "the bundle holding chart app 1.1.0")
	g.Eventually(getHelmOp(g, ns, "app")).WithTimeout(eventually).WithPolling(poll).Should(And(
		HaveField("Status.Version", "1.1.0"),
		HaveField("Status.ObservedGeneration", op.Generation),
		condition(fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonChartApplied, "1.1.0"),
		// No bundle controller here: the Bundle targets nothing yet.
		HaveField("Status.Display.ReadyBundleDeployments", "0/0"),
	), "the HelmOp accepted with version 1.1.0")
	// Not polled: no pollingInterval.
	g.Expect(getHelmOp(g, ns, "app")().Status.Conditions).NotTo(ContainElement(HaveField("Type", fleet.ConditionPolled)))

	b := &fleet.Bundle{}
	g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, b)).To(Succeed())
	g.Expect(b.Labels).To(Equal(map[string]string{fleet.HelmOpLabel: "app", "team": "blue"}))
	g.Expect(b.Spec.Helm.Chart).To(Equal("app"), "helm.chart names the chart inside the bundle")
	g.Expect(b.Spec.Helm.ReleaseName).To(Equal("my-app"))
	g.Expect(b.Spec.DefaultNamespace).To(Equal("apps"))
	g.Expect(b.Spec.Targets).To(Equal([]fleet.BundleTarget{{Name: "default", ClusterGroup: "default"}}))
	g.Expect(b.OwnerReferences).To(ContainElement(HaveField("Name", "app")))

	// Deleting the HelmOp deletes its Bundle.
	g.Expect(env.Delete(ctx, op)).To(Succeed())
	g.Eventually(func() bool {
		return env.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, &fleet.Bundle{}) != nil
	}).WithTimeout(eventually).WithPolling(poll).Should(BeTrue(), "the bundle deleted with its HelmOp")
}

func TestHelmOpPollsAndUpgradesToANewVersion(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := newRepo(t, chartrepo.Options{}, "1.0.0")

	op := newHelmOp(ns, "app", fleet.HelmOptions{Repo: repo.URL, Chart: "app", Version: "~1"})
	op.Spec.PollingInterval = &metav1.Duration{Duration: 500 * time.Millisecond}
	g.Expect(env.Create(ctx, op)).To(Succeed())
	g.Eventually(getHelmOp(g, ns, "app")).WithTimeout(eventually).WithPolling(poll).Should(And(
		HaveField("Status.Version", "1.0.0"),
		condition(fleet.ConditionPolled, metav1.ConditionTrue, fleet.ReasonPolled, "1.0.0"),
	), "the HelmOp at 1.0.0, polled")
	first := getHelmOp(g, ns, "app")().Status.LastPollingTime

	g.Expect(repo.Add(appChart("1.2.0"), appChart("2.0.0"))).To(Succeed())
	g.Eventually(bundleChartVersion(g, ns, "app", "app")).WithTimeout(eventually).WithPolling(poll).Should(Equal("1.2.0"), "the bundle upgraded to 1.2.0 (not 2.0.0)")
	g.Eventually(getHelmOp(g, ns, "app")).WithTimeout(eventually).WithPolling(poll).Should(And(
		HaveField("Status.Version", "1.2.0"),
		HaveField("Status.LastPollingTime.Time", BeTemporally(">", first.Time)),
		condition(fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonChartApplied, "1.2.0"),
	), "the HelmOp at 1.2.0")

	// The repository goes away: the poll fails, the deployed version stays.
	repo.Close()
	g.Eventually(getHelmOp(g, ns, "app")).WithTimeout(eventually).WithPolling(poll).Should(And(
		condition(fleet.ConditionPolled, metav1.ConditionFalse, fleet.ReasonFetchFailed, "index"),
		condition(fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonChartApplied, "1.2.0"),
		condition(fleet.ConditionReady, metav1.ConditionFalse, fleet.ReasonFetchFailed, ""),
		HaveField("Status.Version", "1.2.0"),
	), "the failed poll reported, 1.2.0 kept")
	g.Expect(bundleChartVersion(g, ns, "app", "app")()).To(Equal("1.2.0"))
}

// Each bad spec is refused with a False Accepted condition whose reason and
// message say what to fix; the Bundle of the last good spec stays as it was.
func TestHelmOpBadInput(t *testing.T) {
	ns := newNamespace(t)
	repo := newRepo(t, chartrepo.Options{}, "1.0.0", "1.1.0")
	for _, tc := range []struct {
		name   string
		helm   fleet.HelmOptions
		secret string
		reason string
		msg    string
	}{
		{"bad-constraint", fleet.HelmOptions{Repo: repo.URL, Chart: "app", Version: ">= banana"}, "", fleet.ReasonInvalidVersion, "neither a version nor a semver range"},
		{"no-match", fleet.HelmOptions{Repo: repo.URL, Chart: "app", Version: "9.x"}, "", fleet.ReasonVersionNotFound, "available: 1.1.0, 1.0.0"},
		{"no-chart", fleet.HelmOptions{Repo: repo.URL, Chart: "nope"}, "", fleet.ReasonVersionNotFound, `chart "nope" not found`},
		{"unreachable", fleet.HelmOptions{Repo: "http://127.0.0.1:1/charts", Chart: "app"}, "", fleet.ReasonFetchFailed, "127.0.0.1:1"},
		{"bad-url", fleet.HelmOptions{Repo: "ftp://charts.example.com", Chart: "app"}, "", fleet.ReasonInvalidOptions, "helm.repo \"ftp://charts.example.com\" must be a http, https, oci URL"},
		{"local-chart", fleet.HelmOptions{Chart: "./app"}, "", fleet.ReasonInvalidOptions, "set helm.repo"},
		{"oci-with-chart", fleet.HelmOptions{Repo: "oci://127.0.0.1:1/charts", Chart: "app"}, "", fleet.ReasonInvalidOptions, "must be empty when helm.repo is an oci:// reference"},
		{"values-files", fleet.HelmOptions{Repo: repo.URL, Chart: "app", ValuesFiles: []string{"v.yaml"}}, "", fleet.ReasonInvalidOptions, "helm.valuesFiles"},
		{"missing-secret", fleet.HelmOptions{Repo: repo.URL, Chart: "app"}, "nope", fleet.ReasonSecretNotFound, "Secret nope not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			op := newHelmOp(ns, tc.name, tc.helm)
			op.Spec.HelmSecretName = tc.secret
			g.Expect(env.Create(ctx, op)).To(Succeed())
			g.Eventually(getHelmOp(g, ns, tc.name)).WithTimeout(eventually).WithPolling(poll).Should(And(
				condition(fleet.ConditionAccepted, metav1.ConditionFalse, tc.reason, tc.msg),
				condition(fleet.ConditionReady, metav1.ConditionFalse, tc.reason, tc.msg),
				HaveField("Status.Display.Error", true),
			), "HelmOp %s refused with %s", tc.name, tc.reason)
			g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.name}, &fleet.Bundle{})).NotTo(Succeed(), "no bundle written")
		})
	}

	t.Run("a bad change keeps the deployed version", func(t *testing.T) {
		g := NewWithT(t)
		op := newHelmOp(ns, "good", fleet.HelmOptions{Repo: repo.URL, Chart: "app", Version: "1.0.0"})
		g.Expect(env.Create(ctx, op)).To(Succeed())
		g.Eventually(bundleChartVersion(g, ns, "good", "app")).WithTimeout(eventually).WithPolling(poll).Should(Equal("1.0.0"))
		before := &fleet.Bundle{}
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns, Name: "good"}, before)).To(Succeed())

		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(op), op)).To(Succeed())
		op.Spec.Helm.Version = "3.x"
		g.Expect(env.Update(ctx, op)).To(Succeed())
		g.Eventually(getHelmOp(g, ns, "good")).WithTimeout(eventually).WithPolling(poll).Should(And(
			condition(fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonVersionNotFound, "version 3.x not found"),
			HaveField("Status.Version", "1.0.0"),
		))
		after := &fleet.Bundle{}
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns, Name: "good"}, after)).To(Succeed())
		g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "the bundle untouched")

		// Fixing it applies it.
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(op), op)).To(Succeed())
		op.Spec.Helm.Version = "1.1.x"
		g.Expect(env.Update(ctx, op)).To(Succeed())
		g.Eventually(bundleChartVersion(g, ns, "good", "app")).WithTimeout(eventually).WithPolling(poll).Should(Equal("1.1.0"))
		g.Eventually(getHelmOp(g, ns, "good")).WithTimeout(eventually).WithPolling(poll).Should(
			condition(fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonChartApplied, "1.1.0"))
	})

	t.Run("a bundle of that name from a GitRepo is not taken over", func(t *testing.T) {
		g := NewWithT(t)
		other := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken", Labels: map[string]string{fleet.RepoLabel: "somerepo"}}}
		g.Expect(env.Create(ctx, other)).To(Succeed())
		op := newHelmOp(ns, "taken", fleet.HelmOptions{Repo: repo.URL, Chart: "app"})
		g.Expect(env.Create(ctx, op)).To(Succeed())
		g.Eventually(getHelmOp(g, ns, "taken")).WithTimeout(eventually).WithPolling(poll).Should(
			condition(fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonNotOwned, "belongs to GitRepo somerepo"))
		got := &fleet.Bundle{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(other), got)).To(Succeed())
		g.Expect(got.Spec.Resources).To(BeEmpty(), "the GitRepo's bundle untouched")
		g.Expect(env.Delete(ctx, op)).To(Succeed())
		g.Eventually(func() error { return env.Get(ctx, client.ObjectKeyFromObject(op), &fleet.HelmOp{}) }).
			WithTimeout(eventually).WithPolling(poll).ShouldNot(Succeed(), "the HelmOp gone")
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(other), got)).To(Succeed(), "the GitRepo's bundle kept when the HelmOp goes")
	})
}

// A GitRepoRestriction of the namespace applies to HelmOps: a chart
// repository outside allowedRepoPatterns is refused, and lifting the
// restriction lets the HelmOp deploy.
func TestHelmOpRestricted(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := newRepo(t, chartrepo.Options{}, "1.0.0")
	res := &fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "only-corp"},
		AllowedRepoPatterns: []string{`https://charts\.corp\.example/.*`}}
	g.Expect(env.Create(ctx, res)).To(Succeed())

	op := newHelmOp(ns, "app", fleet.HelmOptions{Repo: repo.URL, Chart: "app"})
	g.Expect(env.Create(ctx, op)).To(Succeed())
	g.Eventually(getHelmOp(g, ns, "app")).WithTimeout(eventually).WithPolling(poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonRestricted, "does not allow chart repository "+repo.URL))
	n, _ := repo.Requests()
	g.Expect(n).To(BeZero(), "a restricted HelmOp reaches no repository")

	res.AllowedRepoPatterns = append(res.AllowedRepoPatterns, `http://127\.0\.0\.1:[0-9]+`)
	g.Expect(env.Update(ctx, res)).To(Succeed())
	g.Eventually(bundleChartVersion(g, ns, "app", "app")).WithTimeout(eventually).WithPolling(poll).Should(Equal("1.0.0"), "deployed once allowed")
}

// The helmSecretName credentials reach the HelmOp's repository and no
// other host: a target that points at another repository gets none.
func TestHelmOpCredentials(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	private := newRepo(t, chartrepo.Options{TLS: true, Username: "tenant", Password: "helm-s3cret"}, "1.0.0")
	other := newRepo(t, chartrepo.Options{}, "1.0.0")
	g.Expect(env.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helm"}, Type: corev1.SecretTypeBasicAuth,
		Data: map[string][]byte{"username": []byte("tenant"), "password": []byte("helm-s3cret"), "cacerts": private.CA}})).To(Succeed())

	op := newHelmOp(ns, "private", fleet.HelmOptions{Repo: private.URL, Chart: "app"})
	g.Expect(env.Create(ctx, op)).To(Succeed())
	g.Eventually(getHelmOp(g, ns, "private")).WithTimeout(eventually).WithPolling(poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonFetchFailed, "certificate"), "refused without the CA")

	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(op), op)).To(Succeed())
	op.Spec.HelmSecretName = "helm"
	op.Spec.Targets = []fleet.BundleTarget{
		{Name: "elsewhere", ClusterName: "x", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Repo: other.URL}}},
		{Name: "all", ClusterGroup: "default"},
	}
	g.Expect(env.Update(ctx, op)).To(Succeed())
	g.Eventually(bundleChartVersion(g, ns, "private", "app")).WithTimeout(eventually).WithPolling(poll).Should(Equal("1.0.0"), "deployed with the credentials")
	_, auths := private.Requests()
	g.Expect(auths).NotTo(BeEmpty(), "credentials sent to the HelmOp's repository")
	n, auths := other.Requests()
	g.Expect(n).To(BeNumerically(">", 0), "the target's repository was asked")
	g.Expect(auths).To(BeEmpty(), "no credentials sent to another repository")

	// Another tenant names the Secret from its own namespace: it is looked
	// up there only, and not found.
	otherNS := newNamespace(t)
	theft := newHelmOp(otherNS, "theft", fleet.HelmOptions{Repo: other.URL, Chart: "app"})
	theft.Spec.HelmSecretName = "helm"
	g.Expect(env.Create(ctx, theft)).To(Succeed())
	g.Eventually(getHelmOp(g, otherNS, "theft")).WithTimeout(eventually).WithPolling(poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonSecretNotFound, "Secret helm not found in namespace "+otherNS))
	_, auths = other.Requests()
	g.Expect(auths).To(BeEmpty(), "no credentials sent for the other tenant")
}

// A chart in an OCI registry (HTTPS with a self-signed certificate): refused
// until insecureSkipTLSVerify is set, then resolved against the registry's
// tags and deployed.
func TestHelmOpFromOCIRegistry(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := chartrepo.NewRegistry()
	t.Cleanup(reg.Close)
	g.Expect(reg.Push("charts/app", appChart("1.0.0"), appChart("1.3.0"), appChart("2.0.0"))).To(Succeed())

	op := newHelmOp(ns, "oci", fleet.HelmOptions{Repo: reg.Ref("charts/app"), Version: "^1.0"})
	g.Expect(env.Create(ctx, op)).To(Succeed())
	g.Eventually(getHelmOp(g, ns, "oci")).WithTimeout(eventually).WithPolling(poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonFetchFailed, "certificate"), "refused without trust")

	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(op), op)).To(Succeed())
	op.Spec.InsecureSkipTLSverify = true
	g.Expect(env.Update(ctx, op)).To(Succeed())
	g.Eventually(bundleChartVersion(g, ns, "oci", "app")).WithTimeout(eventually).WithPolling(poll).Should(Equal("1.3.0"), "chart 1.3.0 from the registry")
	g.Eventually(getHelmOp(g, ns, "oci")).WithTimeout(eventually).WithPolling(poll).Should(And(
		HaveField("Status.Version", "1.3.0"),
		condition(fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonChartApplied, "1.3.0"),
	))
}

// By default, as in Fleet, the Bundle holds no chart: helm.version is the
// resolved version, and helmOpOptions carry helmSecretName and
// insecureSkipTLSVerify for the agents; a target naming another repository
// gets the version resolved there.
func TestHelmOpBundleForAgentPull(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	private := newRepo(t, chartrepo.Options{Username: "tenant", Password: "pw"}, "1.0.0", "1.2.0")
	other := newRepo(t, chartrepo.Options{}, "1.0.0", "1.5.0")
	g.Expect(env.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helm"}, Type: corev1.SecretTypeBasicAuth,
		Data: map[string][]byte{"username": []byte("tenant"), "password": []byte("pw")}})).To(Succeed())
	op := newHelmOp(ns, "pulled", fleet.HelmOptions{Repo: private.URL, Chart: "app", Version: "1.x"})
	op.Spec.HelmSecretName = "helm"
	op.Spec.Targets = []fleet.BundleTarget{
		{Name: "elsewhere", ClusterName: "x", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Repo: other.URL}}},
		{ClusterGroup: "default"},
	}
	g.Expect(env.Create(ctx, op)).To(Succeed())
	g.Eventually(bundleChartVersion(g, ns, "pulled", "app")).WithTimeout(eventually).WithPolling(poll).Should(Equal("1.2.0"))
	b := &fleet.Bundle{}
	g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pulled"}, b)).To(Succeed())
	g.Expect(b.Spec.Resources).To(BeEmpty())
	g.Expect(b.Spec.HelmOpOptions).To(Equal(&fleet.BundleHelmOptions{SecretName: "helm"}))
	g.Expect(b.Spec.Helm.Repo).To(Equal(private.URL))
	g.Expect(b.Spec.Targets[0].Helm.Version).To(Equal("1.5.0"), "the target's version resolved in its own repository")
	g.Expect(b.Spec.Targets[1].Name).To(Equal("target001"))
	_, auths := other.Requests()
	g.Expect(auths).To(BeEmpty(), "no credentials sent to the target's repository")
	_, auths = private.Requests()
	g.Expect(auths).NotTo(BeEmpty(), "the version resolved with the credentials")
}
