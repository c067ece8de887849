package security_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/framework"
)

// Issue #32, Low 7: each deploy is bounded in time and memory.
//
// The attacker controls a git repository that a GitRepo deploys (foothold
// f): its chart's templates hold nested until loops, which render for
// hours, or build a list of 200 million items. The downstream cluster runs
// a real agent with one deploy slot; another team's repository deploys to
// the same cluster. The attacker's deploys must be stopped at the agent's
// bounds, reported on their BundleDeployments, and not hold the slot: the
// other bundle deploys meanwhile, and the agent stays alive and small.
var _ = Describe("Low 7: each deploy is bounded in time and memory", Ordered, func() {
	const (
		agentNS   = "sec-bounds-agent"
		appNS     = "sec-bounds"
		timeout   = 8 * time.Second
		memory    = "256Mi"
		memoryKiB = 256 << 10
	)
	var (
		down     client.Client
		cred     *upstream.Credential
		agent    *framework.Process
		attacker *gittest.Repo
	)

	// gitRepo deploys a repository to the agent's cluster, as its operator
	// would, and returns the name of its one Bundle's BundleDeployment.
	gitRepo := func(name, url string) string {
		GinkgoHelper()
		Expect(env.Admin.Create(env.Ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: cred.Namespace, Name: name},
			Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", PollingInterval: pollEvery(time.Second),
				Targets: []fleet.GitTarget{{Name: "bounds", ClusterName: cred.ClusterName}}}})).To(Succeed())
		var bundle string
		Eventually(func(g Gomega) {
			bundles := bundlesOf(cred.Namespace, name)
			g.Expect(bundles).To(HaveLen(1))
			bundle = bundles[0].Name
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
		return bundle
	}
	deployed := func(bd string) func(Gomega) *metav1.Condition {
		return func(g Gomega) *metav1.Condition {
			got := &fleet.BundleDeployment{}
			g.Expect(env.Admin.Get(env.Ctx, types.NamespacedName{Namespace: cred.ClusterNamespace, Name: bd}, got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, fleet.ConditionDeployed)
			g.Expect(c).NotTo(BeNil(), "no Deployed condition yet")
			return c
		}
	}

	BeforeAll(func() {
		ctx := env.Ctx
		ds := env.Downstreams[0]
		var err error
		down, err = ds.Client(kinds.Scheme())
		Expect(err).NotTo(HaveOccurred())
		applyRegistration(down, agentNS, "sec-bounds")
		agent, err = framework.Start(env.LogDir, "agent-bounds", "fleet-agent", "--kubeconfig", ds.Kubeconfig, "--namespace", agentNS,
			"--checkin-interval", "5s", "--min-backoff", "100ms", "--max-backoff", "2s",
			"--deploy-concurrency", "1", "--deploy-timeout", timeout.String(), "--deploy-memory-limit", memory)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(agent.Stop)
		Eventually(func(g Gomega) {
			cred, err = upstream.LoadStored(ctx, down, agentNS)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cred).NotTo(BeNil(), "no credential stored yet; agent log:\n%s", agent.Tail(4000))
		}, 90*time.Second, 200*time.Millisecond).Should(Succeed())
		attacker, _ = gitRepoAt("sec-bounds-attacker", map[string]string{
			"loop/Chart.yaml": "apiVersion: v2\nname: loop\nversion: 0.1.0\n",
			"loop/fleet.yaml": "defaultNamespace: " + appNS + "\n",
			// Ten billion iterations: hours of rendering.
			"loop/templates/cm.yaml": "{{- range $i := until 100000 }}{{- range $j := until 100000 }}{{- end }}{{- end }}\n" +
				fmt.Sprintf(configMap, "sec-bounds-loop"),
		})
	})

	It("7: a chart whose templates loop is stopped at the time bound, and another bundle deploys meanwhile", func() {
		ctx := env.Ctx
		loop := gitRepo("sec-bounds-attacker", env.GitURL+"/sec-bounds-attacker")
		By("the attacker's chart holds the agent's only deploy slot")
		Eventually(func() []int { return childrenOf(agent.PID()) }, time.Minute, 100*time.Millisecond).ShouldNot(BeEmpty(),
			"the loop's deploy to start; agent log:\n%s", agent.Tail(4000))

		By("another team's repository deploys to the same cluster")
		_, victimURL := gitRepoAt("sec-bounds-victim", map[string]string{
			"app/fleet.yaml": "defaultNamespace: " + appNS + "\n",
			"app/cm.yaml":    fmt.Sprintf(configMap, "sec-bounds-victim"),
		})
		victim := gitRepo("sec-bounds-victim", victimURL)
		Eventually(func(g Gomega) {
			c := deployed(victim)(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		}, time.Minute, 250*time.Millisecond).Should(Succeed(), "the other bundle to deploy; agent log:\n%s", agent.Tail(4000))
		cm := &corev1.ConfigMap{}
		Expect(down.Get(ctx, types.NamespacedName{Namespace: appNS, Name: "sec-bounds-victim"}, cm)).To(Succeed())
		Expect(cm.Data).To(Equal(map[string]string{"k": "v"}))

		By("the loop's BundleDeployment says which bound it met and how to raise it")
		c := deployed(loop)(Default)
		Expect(c.Status).To(Equal(metav1.ConditionFalse))
		Expect(c.Reason).To(Equal(fleet.ReasonDeployTimedOut), c.Message)
		Expect(c.Message).To(And(ContainSubstring(appNS+"/"), ContainSubstring(timeout.String()),
			ContainSubstring("--deploy-timeout"), ContainSubstring("FLEET_AGENT_DEPLOY_TIMEOUT"), ContainSubstring("tries again in 1m0s")))
		expectNoConfigMap(down, appNS, "sec-bounds-loop")

		By("the loop's deploy is gone, with all it started, and is not tried again at once")
		Eventually(func() []int { return childrenOf(agent.PID()) }, 10*time.Second, 100*time.Millisecond).Should(BeEmpty())
		Consistently(func() []int { return childrenOf(agent.PID()) }, 3*time.Second, 100*time.Millisecond).Should(BeEmpty())
		Expect(deployRuns(agent.Log, appNS+"/"+loop)).To(HaveLen(1), "one run of the loop")
	})

	It("7: a chart whose templates build a huge list is stopped at the memory bound", func() {
		_, err := attacker.Commit("memory", map[string]string{
			"memory/Chart.yaml": "apiVersion: v2\nname: memory\nversion: 0.1.0\n",
			"memory/fleet.yaml": "defaultNamespace: " + appNS + "\n",
			// 200 million items: 1.6 GB, and as much again while it grows.
			"memory/templates/cm.yaml": "{{- $huge := until 200000000 }}\n" + fmt.Sprintf(configMap, "sec-bounds-memory") +
				"  n: \"{{ len $huge }}\"\n",
		}, "loop")
		Expect(err).NotTo(HaveOccurred())
		var bd string
		Eventually(func(g Gomega) {
			list := &fleet.BundleDeploymentList{}
			g.Expect(env.Admin.List(env.Ctx, list, client.InNamespace(cred.ClusterNamespace))).To(Succeed())
			for _, b := range list.Items {
				if strings.HasSuffix(b.Name, "memory") {
					bd = b.Name
				}
			}
			g.Expect(bd).NotTo(BeEmpty())
			c := deployed(bd)(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "agent log:\n%s", agent.Tail(4000))
			g.Expect(c.Reason).To(Equal(fleet.ReasonDeployOutOfMemory), c.Message)
			g.Expect(c.Message).To(And(ContainSubstring(memory), ContainSubstring("--deploy-memory-limit"),
				ContainSubstring("FLEET_AGENT_DEPLOY_MEMORY_LIMIT")))
		}, time.Minute, 250*time.Millisecond).Should(Succeed())
		expectNoConfigMap(down, appNS, "sec-bounds-memory")

		By("the child's memory stayed within the bound (and its binary's pages)")
		runs := deployRuns(agent.Log, appNS+"/"+bd)
		Expect(runs).To(HaveLen(1))
		Expect(runs[0]).To(BeNumerically("<", memoryKiB+128<<10), "peak RSS in KiB")
	})

	It("7: the agent is alive and small, and the other bundle is as it was", func() {
		Expect(agent.Exited()).To(BeFalse(), "agent log:\n%s", agent.Tail(4000))
		Expect(rssKiB(agent.PID())).To(BeNumerically("<", 128<<10), "the agent's resident memory in KiB")
		cm := &corev1.ConfigMap{}
		Expect(down.Get(env.Ctx, types.NamespacedName{Namespace: appNS, Name: "sec-bounds-victim"}, cm)).To(Succeed())
		Expect(cm.Data).To(Equal(map[string]string{"k": "v"}))
		err := down.Get(env.Ctx, types.NamespacedName{Namespace: appNS, Name: "sec-bounds-loop"}, &corev1.ConfigMap{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})
})

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[0] != "Z" && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, child)
		}
	}
	return out
}

// rssKiB is the resident memory of pid.
func rssKiB(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			Expect(err).NotTo(HaveOccurred())
			return kib
		}
	}
	Fail("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
	return 0
}

// deployRuns reads the agent's log for the runs of its deploy binary on
// release ("namespace/name"), and returns the peak RSS (KiB) of each.
func deployRuns(logPath, release string) []int {
	f, err := os.Open(logPath)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var peaks []int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var entry struct {
			Msg     string  `json:"msg"`
			Release string  `json:"release"`
			MaxRSS  float64 `json:"maxRSSKiB"`
		}
		if json.Unmarshal(sc.Bytes(), &entry) == nil && entry.Msg == "Deploy binary ended" && entry.Release == release {
			peaks = append(peaks, int(entry.MaxRSS))
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return peaks
}
