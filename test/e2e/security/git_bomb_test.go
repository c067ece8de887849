package security_test

import (
	"fmt"
	"path/filepath"
	"runtime/metrics"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/framework"
)

// heapSampler records the highest live heap of this process (which runs the
// manager, and the git server, whose served objects stream) above the heap
// when it started.
type heapSampler struct {
	base uint64
	peak atomic.Uint64
	stop chan struct{}
}

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{base: liveHeap(), stop: make(chan struct{})}
	go func() {
		for {
			if v := liveHeap(); v > h.base && v-h.base > h.peak.Load() {
				h.peak.Store(v - h.base)
			}
			select {
			case <-h.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return h
}

var _ = Describe("Git bomb", Ordered, func() {
	const (
		victimNS   = "gitbomb-victim"
		attackerNS = "gitbomb-attacker"
	)
	var (
		victimRepo *gittest.Repo
		clusterNS  string
	)

	// deployed waits until the victim's cluster has the BundleDeployment of
	// sha and returns how long that took from start.
	deployed := func(sha, previous string, start time.Time) (string, time.Duration) {
		var id string
		Eventually(func(g Gomega) {
			b := bundlesOf(victimNS, "ordinary")
			g.Expect(b).To(HaveLen(1))
			g.Expect(b[0].Labels).To(HaveKeyWithValue(fleet.CommitLabel, sha))
			bds := &fleet.BundleDeploymentList{}
			g.Expect(env.Admin.List(env.Ctx, bds, client.InNamespace(clusterNS), client.MatchingLabels{fleet.RepoLabel: "ordinary"})).To(Succeed())
			g.Expect(bds.Items).To(HaveLen(1))
			g.Expect(bds.Items[0].Spec.DeploymentID).NotTo(BeEmpty())
			g.Expect(bds.Items[0].Spec.DeploymentID).NotTo(Equal(previous))
			id = bds.Items[0].Spec.DeploymentID
		}).WithTimeout(2 * time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
		return id, time.Since(start)
	}

	It("16: a tenant's repository of 512 MiB of zeros is refused as it streams, and another tenant's commits still reach their cluster", func() {
		ctx := env.Ctx
		By("a victim with a cluster and an ordinary GitRepo in its own namespace")
		v := registerByToken(ctx, env.Downstreams[1], victimNS, "gitbomb-victim-agent", map[string]string{"env": "gitbomb"})
		Eventually(func(g Gomega) {
			c := &fleet.Cluster{}
			g.Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(v.cluster), c)).To(Succeed())
			g.Expect(c.Status.Namespace).NotTo(BeEmpty())
			clusterNS = c.Status.Namespace
		}).WithTimeout(time.Minute).Should(Succeed())
		var url string
		victimRepo, url = gitRepoAt("gitbomb-ordinary", map[string]string{"cm.yaml": fmt.Sprintf(configMap, "v1")})
		sha1, err := victimRepo.Commit("v1", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(env.Admin.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: victimNS, Name: "ordinary"},
			Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", PollingInterval: pollEvery(time.Second),
				Targets: []fleet.GitTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "gitbomb"}}}}}})).To(Succeed())
		id, _ := deployed(sha1, "", time.Now())

		By("without the bomb, how long a new commit takes to reach the cluster")
		start := time.Now()
		sha2, err := victimRepo.Commit("v2", map[string]string{"cm.yaml": fmt.Sprintf(configMap, "v2")})
		Expect(err).NotTo(HaveOccurred())
		id, baseline := deployed(sha2, id, start)

		By("the attacker, a tenant of another namespace, points a GitRepo at its bomb: 512 MiB of zeros, half a MiB compressed")
		bomb, err := gittest.NewRepo(filepath.Join(env.GitRoot, "gitbomb"), "main")
		Expect(err).NotTo(HaveOccurred())
		_, err = bomb.CommitLarge("bomb", map[string]string{"app/cm.yaml": fmt.Sprintf(configMap, "bomb")}, "app/zeros.bin", 512<<20, 0)
		Expect(err).NotTo(HaveOccurred())
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), attackerNS)
		Expect(err).NotTo(HaveOccurred())
		heap := startHeapSampler()
		defer close(heap.stop)
		Expect(tenant.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: attackerNS, Name: "bomb"},
			Spec: fleet.GitRepoSpec{Repo: env.GitURL + "/gitbomb", Branch: "main", PollingInterval: pollEvery(time.Second)}})).To(Succeed())

		By("the bomb is refused, naming the limit, the file and the flag that raises it")
		c := gitRepoCondition(tenant, attackerNS, "bomb", fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonGitLimitExceeded, 2*time.Minute)
		Expect(c.Message).To(SatisfyAll(ContainSubstring("git file size limit exceeded"), ContainSubstring("app/zeros.bin"),
			ContainSubstring("512.0 MiB"), ContainSubstring("--git-max-file-bytes")))
		gitRepoCondition(tenant, attackerNS, "bomb", fleet.ConditionGitPolling, metav1.ConditionFalse, fleet.ReasonGitLimitExceeded, 10*time.Second)
		Expect(bundlesOf(attackerNS, "bomb")).To(BeEmpty())

		By("while the bomb keeps being polled, the victim's next commit reaches its cluster as fast as before")
		start = time.Now()
		sha3, err := victimRepo.Commit("v3", map[string]string{"cm.yaml": fmt.Sprintf(configMap, "v3")})
		Expect(err).NotTo(HaveOccurred())
		_, withBomb := deployed(sha3, id, start)
		Expect(withBomb).To(BeNumerically("<", 2*baseline+5*time.Second), "baseline %s", baseline)

		GinkgoWriter.Printf("victim commit reached its cluster in %s without the bomb, %s with it; heap peak +%d MiB\n", baseline, withBomb, heap.peak.Load()>>20)
		By("the manager's heap never held the file: it grew by far less than 512 MiB")
		Expect(heap.peak.Load()).To(BeNumerically("<", uint64(128<<20)), "the heap grew by %d MiB", heap.peak.Load()>>20)
		c = gitRepoCondition(tenant, attackerNS, "bomb", fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonGitLimitExceeded, 10*time.Second)
		Expect(c.Message).To(ContainSubstring("app/zeros.bin"))
	})
})
