package schedule_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/schedule"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:    m,
		Name: "schedule",
		SetupReconcilers: func(_ context.Context, mgr ctrl.Manager) error {
			return (&schedule.Reconciler{Client: mgr.GetClient(), Workers: 2}).SetupWithManager(mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

const timeout = 30 * time.Second

func createClusters(ctx context.Context, g *WithT, ns string, clusters map[string]map[string]string) {
	for name, labels := range clusters {
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}}
		g.Expect(env.CreateAndWait(ctx, c)).To(Succeed())
	}
}

func getCluster(ctx context.Context, g Gomega, ns, name string) *fleet.Cluster {
	c := &fleet.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
	return c
}

func getSchedule(ctx context.Context, g Gomega, s *fleet.Schedule) *fleet.Schedule {
	got := &fleet.Schedule{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(s), got)).To(Succeed())
	return got
}

// A Schedule that opens a window of 4s every 12s marks the clusters it
// selects (by name, and through a group selector) scheduled, opens and shuts
// their window as the clock goes, leaves the others alone, and releases its
// clusters when it goes.
func TestWindowsOpenAndCloseOnTheClusters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "windows")
	g.Expect(err).NotTo(HaveOccurred())
	createClusters(ctx, g, ns.Name, map[string]map[string]string{"a": nil, "b": {"env": "edge"}, "c": {"env": "dev"}})
	group := &fleet.ClusterGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns.Name, Labels: map[string]string{"tier": "edge"}},
		Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "edge"}}},
	}
	g.Expect(env.CreateAndWait(ctx, group)).To(Succeed())
	sched := &fleet.Schedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns.Name},
		Spec: fleet.ScheduleSpec{
			Schedule: "*/12 * * * * *", Duration: metav1.Duration{Duration: 4 * time.Second}, Location: "Europe/Berlin",
			Targets: fleet.ScheduleTargets{Clusters: []fleet.ScheduleTarget{
				{Name: "by-name", ClusterName: "a"},
				{Name: "by-group", ClusterGroupSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}}},
			}},
		},
	}
	g.Expect(env.Create(ctx, sched)).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := getSchedule(ctx, g, sched)
		g.Expect(got.Status.MatchingClusters).To(Equal([]string{"a", "b"}))
		g.Expect(got.Status.NextStartTime.IsZero()).To(BeFalse())
		g.Expect(conditions.IsTrue(got, fleet.ConditionReady)).To(BeTrue())
		for _, name := range []string{"a", "b"} {
			g.Expect(getCluster(ctx, g, ns.Name, name).Status.Scheduled).To(BeTrue(), "cluster %s is scheduled", name)
		}
	}).WithTimeout(timeout).Should(Succeed(), "the Schedule holds a and b")
	g.Expect(getCluster(ctx, g, ns.Name, "c").Status.Scheduled).To(BeFalse(), "cluster c is not held")

	// The window opens and shuts with the clock, on the Schedule and on
	// the clusters alike.
	for _, open := range []bool{true, false, true} {
		g.Eventually(func(g Gomega) {
			got := getSchedule(ctx, g, sched)
			g.Expect(got.Status.Active).To(Equal(open))
			a := getCluster(ctx, g, ns.Name, "a")
			g.Expect(a.Status.Scheduled).To(BeTrue())
			g.Expect(a.Status.ActiveSchedule).To(Equal(open))
		}).WithTimeout(timeout).WithPolling(200*time.Millisecond).Should(Succeed(), "the window is open: %v", open)
	}

	// A cluster relabelled into the group is held too.
	c := getCluster(ctx, g, ns.Name, "c")
	c.Labels["env"] = "edge"
	g.Expect(env.Update(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getCluster(ctx, g, ns.Name, "c").Status.Scheduled).To(BeTrue())
		g.Expect(getSchedule(ctx, g, sched).Status.MatchingClusters).To(Equal([]string{"a", "b", "c"}))
	}).WithTimeout(timeout).Should(Succeed(), "cluster c is held once in the group")

	// Without the Schedule, nothing holds the clusters.
	g.Expect(env.Delete(ctx, sched)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, name := range []string{"a", "b", "c"} {
			got := getCluster(ctx, g, ns.Name, name)
			g.Expect(got.Status.Scheduled).To(BeFalse(), "cluster %s is released", name)
			g.Expect(got.Status.ActiveSchedule).To(BeFalse())
		}
	}).WithTimeout(timeout).Should(Succeed(), "the clusters are released")
}

// Bad input: each invalid Schedule gets Ready False naming itself and the
// field, and holds nothing; a valid Schedule beside them goes on.
func TestInvalidSchedulesSayWhyAndOthersGoOn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "invalid")
	g.Expect(err).NotTo(HaveOccurred())
	createClusters(ctx, g, ns.Name, map[string]map[string]string{"bad": nil, "good": nil})
	hour := metav1.Duration{Duration: time.Hour}
	target := fleet.ScheduleTargets{Clusters: []fleet.ScheduleTarget{{ClusterName: "bad"}}}
	cases := []struct {
		name    string
		spec    fleet.ScheduleSpec
		reason  string
		message string
	}{
		{"bad-cron", fleet.ScheduleSpec{Schedule: "0 0 25 * * *", Duration: hour, Location: "UTC", Targets: target},
			fleet.ReasonInvalidSchedule, "schedule " + ns.Name + "/bad-cron: spec.schedule: \"0 0 25 * * *\" is not a cron expression"},
		{"bad-zone", fleet.ScheduleSpec{Schedule: "0 0 22 * * *", Duration: hour, Location: "Europe/Atlantis", Targets: target},
			fleet.ReasonInvalidLocation, "schedule " + ns.Name + "/bad-zone: spec.location: unknown time zone \"Europe/Atlantis\""},
		{"bad-duration", fleet.ScheduleSpec{Schedule: "0 0 * * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, Location: "UTC", Targets: target},
			fleet.ReasonInvalidDuration, "schedule " + ns.Name + "/bad-duration: spec.duration: 2h0m0s is not shorter than the 1h0m0s"},
	}
	for _, tc := range cases {
		g.Expect(env.Create(ctx, &fleet.Schedule{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns.Name}, Spec: tc.spec})).To(Succeed())
	}
	good := &fleet.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "good", Namespace: ns.Name}, Spec: fleet.ScheduleSpec{
		Schedule: "0 0 22 * * *", Duration: hour, Location: "Asia/Tokyo",
		Targets: fleet.ScheduleTargets{Clusters: []fleet.ScheduleTarget{{ClusterName: "good"}}},
	}}
	g.Expect(env.Create(ctx, good)).To(Succeed())

	for _, tc := range cases {
		g.Eventually(func(g Gomega) {
			got := getSchedule(ctx, g, &fleet.Schedule{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns.Name}})
			c := conditions.Get(got, fleet.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(tc.reason))
			g.Expect(c.Message).To(HavePrefix(tc.message))
			g.Expect(got.Status.MatchingClusters).To(BeEmpty())
		}).WithTimeout(timeout).Should(Succeed(), "%s says what is wrong", tc.name)
	}
	g.Eventually(func(g Gomega) {
		got := getSchedule(ctx, g, good)
		g.Expect(conditions.IsTrue(got, fleet.ConditionReady)).To(BeTrue())
		g.Expect(got.Status.MatchingClusters).To(Equal([]string{"good"}))
		g.Expect(getCluster(ctx, g, ns.Name, "good").Status.Scheduled).To(BeTrue())
	}).WithTimeout(timeout).Should(Succeed(), "the valid Schedule goes on")
	g.Expect(getCluster(ctx, g, ns.Name, "bad").Status.Scheduled).To(BeFalse(), "an invalid Schedule holds nothing")

	// Fixed, it holds its cluster.
	fixed := getSchedule(ctx, g, &fleet.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "bad-zone", Namespace: ns.Name}})
	fixed.Spec.Location = "Europe/Lisbon"
	g.Expect(env.Update(ctx, fixed)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsTrue(getSchedule(ctx, g, fixed), fleet.ConditionReady)).To(BeTrue())
		g.Expect(getCluster(ctx, g, ns.Name, "bad").Status.Scheduled).To(BeTrue())
	}).WithTimeout(timeout).Should(Succeed(), "the fixed Schedule holds its cluster")
}
