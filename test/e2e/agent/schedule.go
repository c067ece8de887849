package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

const (
	scheduleRepoName = "windowed"
	// windowLead is how far ahead the window is moved once the hold was
	// seen: long enough to see the cluster keep the old commit a while.
	windowLead = 15 * time.Second
	// heldWindowLead is how far ahead the window first opens: far enough
	// that no load makes the hold race it.
	heldWindowLead = time.Hour
)

// windowedFiles is the repository at one version: a ConfigMap saying it.
func windowedFiles(version string) map[string]string {
	return map[string]string{
		"fleet.yaml": "defaultNamespace: windowed\n",
		"cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: windowed\ndata:\n  version: " + version + "\n",
	}
}

// scheduleFixture is what the steps of ScheduleSpec share.
type scheduleFixture struct {
	ctx     context.Context
	admin   client.Client
	cluster *cluster
	repo    *gittest.Repo
	git     *gittest.Server
	// windowStart is when the Schedule's window opens.
	windowStart time.Time
}

// version is the version the windowed ConfigMap downstream says.
func (s *scheduleFixture) version(g Gomega) string {
	cm := configMap(s.cluster, "windowed", "windowed")
	g.Expect(cm).NotTo(BeNil(), "the windowed ConfigMap exists downstream")
	return cm.Data["version"]
}

func (s *scheduleFixture) clusterStatus(g Gomega) fleet.ClusterStatus {
	c := &fleet.Cluster{}
	g.Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(s.cluster.Cluster), c)).To(Succeed())
	return c.Status
}

func (s *scheduleFixture) gitRepoCommit(g Gomega) string {
	gr := &fleet.GitRepo{}
	g.Expect(s.admin.Get(s.ctx, types.NamespacedName{Namespace: ws, Name: scheduleRepoName}, gr)).To(Succeed())
	return gr.Status.Commit
}

// ScheduleSpec checks that a Schedule holds a new commit off a cluster with
// a real agent until its window opens, a minute ahead, and then it deploys.
// While it waits the BundleDeployment is offSchedule and says so in its Ready
// condition; what runs stays as it was. The window is computed in the test:
// a cron with seconds that fires once, an hour ahead while the hold is
// checked, then moved to windowLead ahead.
//
// It joins the suite's first downstream cluster again, with an agent of its
// own in a system namespace of its own, and removes what it made when done.
// Call it in an Ordered container.
func ScheduleSpec(ctx context.Context, inputGetter func() SpecInput) {
	s := &scheduleFixture{ctx: ctx, cluster: &cluster{ctx: ctx}}

	BeforeAll(func() {
		input := inputGetter()
		input.validate("ScheduleSpec")
		s.admin = input.Admin
		s.cluster.JoinedCluster = e2e.Join(ctx, e2e.JoinInput{Upstream: input.Upstream, Downstream: input.Downstreams[0], Admin: s.admin,
			LogDir: input.LogDir, SystemNamespace: "windowed-system", AgentArgs: agentArgs(),
			ConfigArgs: []string{"--client-id", "windowed", "-l", "window=nightly"},
		}, registerTimeout)
		DeferCleanup(func() {
			s.cluster.StopAgents()
			Expect(client.IgnoreNotFound(s.admin.Delete(ctx, s.cluster.Cluster))).To(Succeed())
		})
		// The GitRepo and Schedule the specs make live across them.
		DeferCleanup(func() {
			for _, o := range []client.Object{
				&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: scheduleRepoName, Namespace: ws}},
				&fleet.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ws}},
			} {
				Expect(client.IgnoreNotFound(s.admin.Delete(ctx, o))).To(Succeed())
			}
		})
		root, err := os.MkdirTemp("", "fleet-e2e-windowed-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, root)
		s.repo, err = gittest.NewRepo(filepath.Join(root, scheduleRepoName), "main")
		Expect(err).NotTo(HaveOccurred())
		_, err = s.repo.Commit("v1", windowedFiles("v1"))
		Expect(err).NotTo(HaveOccurred())
		s.git = gittest.NewServer(root)
		DeferCleanup(s.git.Close)
	})

	It("deploys the first commit while no Schedule holds the cluster", func() { scheduleDeploysFirst(s) })
	It("holds a new commit off the cluster until the window opens, then deploys it", func() { scheduleHoldsThenDeploys(s) })
}

func scheduleDeploysFirst(s *scheduleFixture) {
	gr := &fleet.GitRepo{
		ObjectMeta: metav1.ObjectMeta{Name: scheduleRepoName, Namespace: ws},
		Spec: fleet.GitRepoSpec{Repo: s.git.RepoURL(scheduleRepoName), Branch: "main",
			PollingInterval: &metav1.Duration{Duration: 2 * time.Second},
			Targets:         []fleet.GitTarget{{Name: "nightly", ClusterSelector: selector("window", "nightly")}},
		},
	}
	Expect(s.admin.Create(s.ctx, gr)).To(Succeed())
	s.cluster.waitState(scheduleRepoName, fleet.Ready, 3*time.Minute)
	e2e.WaitFor("v1 downstream", func(g Gomega) { g.Expect(s.version(g)).To(Equal("v1")) }, 30*time.Second, 250*time.Millisecond)
}

func scheduleHoldsThenDeploys(s *scheduleFixture) {
	// A window that opens once, an hour from now, for ten minutes: a cron
	// with seconds naming that instant (UTC), as Fleet's parser reads it.
	s.windowStart = time.Now().UTC().Add(heldWindowLead).Truncate(time.Second)
	sched := &fleet.Schedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ws},
		Spec: fleet.ScheduleSpec{
			Schedule: onceAt(s.windowStart),
			Duration: metav1.Duration{Duration: 10 * time.Minute}, Location: "UTC",
			Targets: fleet.ScheduleTargets{Clusters: []fleet.ScheduleTarget{{Name: "nightly", ClusterSelector: selector("window", "nightly")}}},
		},
	}
	Expect(s.admin.Create(s.ctx, sched)).To(Succeed())

	e2e.WaitFor("the Schedule to hold the cluster outside its window", func(g Gomega) {
		got := &fleet.Schedule{}
		g.Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(sched), got)).To(Succeed())
		g.Expect(got.Status.MatchingClusters).To(Equal([]string{s.cluster.Cluster.Name}))
		g.Expect(got.Status.Active).To(BeFalse())
		g.Expect(got.Status.NextStartTime).NotTo(BeNil())
		g.Expect(got.Status.NextStartTime.Time).To(BeTemporally("==", s.windowStart))
		st := s.clusterStatus(g)
		g.Expect(st.Scheduled).To(BeTrue())
		g.Expect(st.ActiveSchedule).To(BeFalse())
		g.Expect(s.cluster.bd(scheduleRepoName).Spec.OffSchedule).To(BeTrue())
	}, time.Minute, 250*time.Millisecond)

	commit, err := s.repo.Commit("v2", windowedFiles("v2"))
	Expect(err).NotTo(HaveOccurred())
	e2e.WaitFor("the new commit to reach the cluster's BundleDeployment, held", func(g Gomega) {
		g.Expect(s.gitRepoCommit(g)).To(Equal(commit))
		bd := s.cluster.bd(scheduleRepoName)
		g.Expect(bd.Spec.OffSchedule).To(BeTrue())
		g.Expect(bd.Spec.DeploymentID).NotTo(Equal(bd.Status.AppliedDeploymentID))
		ready := meta.FindStatusCondition(bd.Status.Conditions, fleet.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(fleet.ReasonOffSchedule))
		g.Expect(ready.Message).To(ContainSubstring("deployment window"))
	}, 2*time.Minute, 250*time.Millisecond)

	By("the window is moved to open shortly; until it opens, the cluster keeps v1")
	s.windowStart = time.Now().UTC().Add(windowLead).Truncate(time.Second)
	Eventually(func() error {
		got := &fleet.Schedule{}
		if err := s.admin.Get(s.ctx, client.ObjectKeyFromObject(sched), got); err != nil {
			return err
		}
		got.Spec.Schedule = onceAt(s.windowStart)
		return s.admin.Update(s.ctx, got)
	}).WithTimeout(30*time.Second).Should(Succeed(), "the Schedule updated (retried on a conflict with its status writes)")
	Consistently(func(g Gomega) { g.Expect(s.version(g)).To(Equal("v1")) }).
		WithTimeout(time.Until(s.windowStart.Add(-time.Second))).WithPolling(500 * time.Millisecond).Should(Succeed())

	By("once it opens, v2 deploys")
	e2e.WaitFor("v2 downstream once the window is open", func(g Gomega) {
		g.Expect(s.version(g)).To(Equal("v2"))
		st := s.clusterStatus(g)
		g.Expect(st.ActiveSchedule).To(BeTrue())
	}, 2*time.Minute, 250*time.Millisecond)
	Expect(time.Now()).To(BeTemporally(">=", s.windowStart), "v2 came with the window")
	bd := s.cluster.waitState(scheduleRepoName, fleet.Ready, time.Minute)
	Expect(bd.Spec.OffSchedule).To(BeFalse())
}

// onceAt is a cron with seconds (Fleet's format) that fires at t (UTC) and,
// in the test's lifetime, never again.
func onceAt(t time.Time) string {
	return fmt.Sprintf("%d %d %d %d %d ?", t.Second(), t.Minute(), t.Hour(), t.Day(), int(t.Month()))
}
