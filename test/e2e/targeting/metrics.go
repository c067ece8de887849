package targeting

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/summary"
)

// metricsNS is the namespace of MetricsSpec's GitRepo, Bundle and Cluster.
const metricsNS = "metrics"

// metricsRun is what the specs of MetricsSpec share.
type metricsRun struct {
	ctx        context.Context
	admin      client.Client
	metricsURL string
	server     *gittest.Server
	cluster    *fleet.Cluster
}

// MetricsSpec scrapes the manager's metrics endpoint while a GitRepo, its
// Bundle and a Cluster go through their states (the specs report status as
// an agent would), and checks the StateChanged events. Call it in an Ordered
// container, with SpecInput.MetricsURL set.
func MetricsSpec(ctx context.Context, inputGetter func() SpecInput) {
	s := &metricsRun{ctx: ctx}
	BeforeAll(func() {
		input := inputGetter()
		input.validate("MetricsSpec")
		Expect(input.MetricsURL).NotTo(BeEmpty(), "MetricsSpec: SpecInput.MetricsURL is required")
		s.admin, s.metricsURL = input.Admin, input.MetricsURL
		root := GinkgoT().TempDir()
		repo, err := gittest.NewRepo(root+"/app", "main")
		Expect(err).NotTo(HaveOccurred())
		_, err = repo.Commit("app", map[string]string{
			"app/fleet.yaml": "defaultNamespace: app\n",
			"app/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {a: b}\n",
		})
		Expect(err).NotTo(HaveOccurred())
		s.server = gittest.NewServer(root)
		DeferCleanup(s.server.Close)
		Expect(s.admin.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metricsNS}})).To(Succeed())
	})

	It("counts a Cluster waiting for its agent, then a GitRepo and Bundle waiting to be applied", func() {
		s.cluster = &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "m-dev", Namespace: metricsNS, Labels: map[string]string{"env": "dev"}}}
		Expect(s.admin.Create(s.ctx, s.cluster)).To(Succeed())
		s.expectStates("fleet_clusters", map[string]float64{fleet.ClusterStateWaitCheckIn: 1, "Ready": 0})

		Expect(s.admin.Create(s.ctx, &fleet.GitRepo{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: metricsNS},
			Spec: fleet.GitRepoSpec{Repo: s.server.RepoURL("app"), Branch: "main", PollingInterval: &metav1.Duration{Duration: time.Second},
				Targets: []fleet.GitTarget{{Name: "dev", ClusterSelector: selector("env", "dev")}}},
		})).To(Succeed())
		s.expectStates("fleet_gitrepos", map[string]float64{"WaitApplied": 1, "Ready": 0})
		s.expectStates("fleet_bundles", map[string]float64{"WaitApplied": 1, "Ready": 0})

		By("timing the git fetches")
		Eventually(func(g Gomega) {
			g.Expect(s.gauges(g, "fleet_gitrepo_fetch_latest_commit_duration_seconds_count")).To(
				HaveKeyWithValue(fmt.Sprintf(`namespace=%q,result="success"`, metricsNS), BeNumerically(">=", 1)))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("follows the agent's check-in and a deployment turning Ready", func() {
		Expect(s.admin.Status().Patch(s.ctx, s.cluster, client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"status":{"agent":{"lastSeen":%q}}}`, time.Now().UTC().Format(time.RFC3339)))))).To(Succeed())
		s.expectStates("fleet_clusters", map[string]float64{fleet.ClusterStateWaitCheckIn: 0, "WaitApplied": 1})

		var d *fleet.BundleDeployment
		Eventually(func(g Gomega) { d = s.bd(g) }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		reportReady(s.ctx, s.admin, d)
		s.expectStates("fleet_gitrepos", map[string]float64{"WaitApplied": 0, "Ready": 1})
		s.expectStates("fleet_bundles", map[string]float64{"WaitApplied": 0, "Ready": 1})
		s.expectStates("fleet_clusters", map[string]float64{"WaitApplied": 0, "Ready": 1})

		By("no per-object series without --per-object-metrics")
		Eventually(func(g Gomega) {
			for _, m := range []string{"fleet_bundle_state", "fleet_cluster_state", "fleet_gitrepo_ready_clusters"} {
				g.Expect(s.gauges(g, m)).To(BeEmpty(), m)
			}
		}, 5*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("follows a failed apply, with a StateChanged Warning on the GitRepo, the Bundle and the Cluster", func() {
		Eventually(func(g Gomega) {
			d := s.bd(g)
			patch := client.MergeFrom(d.DeepCopy())
			d.Status.AppliedDeploymentID = "s-previous:0"
			meta.SetStatusCondition(&d.Status.Conditions, metav1.Condition{Type: fleet.ConditionDeployed, Status: metav1.ConditionFalse,
				Reason: fleet.ReasonError, Message: "the chart failed"})
			g.Expect(s.admin.Status().Patch(s.ctx, d, patch)).To(Succeed())
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		s.expectStates("fleet_gitrepos", map[string]float64{"Ready": 0, "ErrApplied": 1})
		s.expectStates("fleet_bundles", map[string]float64{"Ready": 0, "ErrApplied": 1})
		s.expectStates("fleet_clusters", map[string]float64{"Ready": 0, "ErrApplied": 1})

		Eventually(func(g Gomega) {
			list := &eventsv1.EventList{}
			g.Expect(s.admin.List(s.ctx, list, client.InNamespace(metricsNS))).To(Succeed())
			changed := map[string][]string{}
			for _, e := range list.Items {
				if e.Reason == fleet.ReasonStateChanged {
					changed[e.Regarding.Kind] = append(changed[e.Regarding.Kind], e.Type+": "+e.Note)
				}
			}
			for _, kind := range []string{"GitRepo", "Bundle", "Cluster"} {
				g.Expect(changed[kind]).To(ContainElement(HavePrefix("Warning: "+kind+" state changed from Ready to ErrApplied")),
					"StateChanged events of %ss: %v", kind, changed[kind])
			}
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("counts every BundleDeployment by the state summaries give it", func() {
		Eventually(func(g Gomega) {
			list := &fleet.BundleDeploymentList{}
			g.Expect(s.admin.List(s.ctx, list)).To(Succeed())
			want := map[string]float64{}
			for _, st := range []fleet.BundleState{fleet.Ready, fleet.NotReady, fleet.WaitApplied, fleet.ErrApplied, fleet.OutOfSync, fleet.Pending, fleet.Modified} {
				want[fmt.Sprintf("state=%q", st)] = 0
			}
			for i := range list.Items {
				want[fmt.Sprintf("state=%q", summary.State(&list.Items[i]))]++
			}
			g.Expect(s.gauges(g, "fleet_bundledeployments")).To(Equal(want))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("drops the series of a namespace whose GitRepos and Bundles are gone", func() {
		Expect(s.admin.Delete(s.ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: metricsNS}})).To(Succeed())
		Eventually(func(g Gomega) {
			for _, metric := range []string{"fleet_gitrepos", "fleet_bundles"} {
				for series := range s.gauges(g, metric) {
					g.Expect(series).NotTo(ContainSubstring(fmt.Sprintf("namespace=%q", metricsNS)), metric)
				}
			}
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		By("the cluster left with no deployments is Ready")
		s.expectStates("fleet_clusters", map[string]float64{"ErrApplied": 0, "Ready": 1})
	})
}

// gauges scrapes the endpoint: the value of each series of metric, keyed
// by its labels as `k="v",...` in the order served.
func (s *metricsRun) gauges(g Gomega, metric string) map[string]float64 {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(s.metricsURL)
	g.Expect(err).NotTo(HaveOccurred(), "scraping %s", s.metricsURL)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	line := regexp.MustCompile(`^` + metric + `\{([^}]*)\} (\S+)$`)
	for _, l := range strings.Split(string(body), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			g.Expect(err).NotTo(HaveOccurred(), "value of %s", l)
			out[m[1]] = v
		}
	}
	return out
}

// inNS is the gauge of a state in the spec's namespace.
func (s *metricsRun) inNS(state string) string {
	return fmt.Sprintf(`namespace=%q,state=%q`, metricsNS, state)
}

// expectStates waits for the gauges of metric to show want, by state.
func (s *metricsRun) expectStates(metric string, want map[string]float64) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		got := s.gauges(g, metric)
		for state, n := range want {
			g.Expect(got).To(HaveKeyWithValue(s.inNS(state), n), "%s{%s}", metric, s.inNS(state))
		}
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
}

// bd is the one BundleDeployment of the spec's namespace.
func (s *metricsRun) bd(g Gomega) *fleet.BundleDeployment {
	list := &fleet.BundleDeploymentList{}
	g.Expect(s.admin.List(s.ctx, list, client.MatchingLabels{fleet.BundleNamespaceLabel: metricsNS})).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1), "the one BundleDeployment of namespace %s", metricsNS)
	return &list.Items[0]
}
