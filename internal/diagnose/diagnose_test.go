package diagnose

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/target"
)

var now = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func cluster(name string) fleet.Cluster {
	return fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name, CreationTimestamp: at(time.Hour)},
		Status: fleet.ClusterStatus{Namespace: names.ClusterNamespace("fleet-default", name), Display: fleet.ClusterDisplay{State: "Ready"},
			Agent: fleet.AgentStatus{LastSeen: at(30 * time.Minute)}}}
}

func lease(cluster string, renewed time.Duration) coordinationv1.Lease {
	t := metav1.NewMicroTime(now.Add(-renewed))
	return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: names.ClusterNamespace("fleet-default", cluster), Name: fleet.AgentLeaseName},
		Spec: coordinationv1.LeaseSpec{RenewTime: &t}}
}

// bd is a Ready BundleDeployment of bundle on cluster.
func bd(bundle, cluster string) fleet.BundleDeployment {
	return fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-" + cluster, Name: bundle, CreationTimestamp: at(time.Hour), Labels: map[string]string{
			fleet.BundleNameLabel: bundle, fleet.BundleNamespaceLabel: "fleet-default", fleet.ClusterLabel: cluster, fleet.ClusterNamespaceLabel: "fleet-default"}},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: "c:1", StagedDeploymentID: "c:1"},
		Status: fleet.BundleDeploymentStatus{AppliedDeploymentID: "c:1", Ready: true, NonModified: true,
			Conditions: []metav1.Condition{{Type: fleet.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: at(time.Hour)}}},
	}
}

// bundle targets every cluster of fleet-default with Helm value tier:
// bronze; its generation is observed.
func bundle(name string, deps ...string) fleet.Bundle {
	b := fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name, Generation: 1},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"tier": "bronze"}}}},
			Targets:                 []fleet.BundleTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}},
		},
		Status: fleet.BundleStatus{ObservedGeneration: 1}}
	for _, d := range deps {
		b.Spec.DependsOn = append(b.Spec.DependsOn, fleet.BundleRef{Name: d})
	}
	return b
}

// healthy is a fleet with nothing to report.
func healthy() *Snapshot {
	g := fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "repo"},
		Status: fleet.GitRepoStatus{Commit: "abc", LastPollingTriggered: at(10 * time.Second),
			Conditions: []metav1.Condition{{Type: fleet.ConditionGitPolling, Status: metav1.ConditionTrue, Reason: fleet.ReasonPolled}}}}
	exp := metav1.NewTime(now.Add(72 * time.Hour))
	s := &Snapshot{
		Taken:             now,
		Clusters:          []fleet.Cluster{cluster("a"), cluster("b")},
		Leases:            []coordinationv1.Lease{lease("a", 10*time.Second), lease("b", 20*time.Second)},
		Bundles:           []fleet.Bundle{bundle("db"), bundle("app", "db")},
		BundleDeployments: []fleet.BundleDeployment{bd("db", "a"), bd("db", "b"), bd("app", "a"), bd("app", "b")},
		GitRepos:          []fleet.GitRepo{g},
		Tokens: []fleet.ClusterRegistrationToken{{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "t"},
			Status: fleet.ClusterRegistrationTokenStatus{Expires: &exp}}},
	}
	render(s)
	return s
}

// render gives each BundleDeployment of s the options and deploymentID the
// manager writes for its cluster, applied by its agent.
func render(s *Snapshot) {
	for i := range s.BundleDeployments {
		bd := &s.BundleDeployments[i]
		var b *fleet.Bundle
		for j := range s.Bundles {
			if s.Bundles[j].Name == bd.Labels[fleet.BundleNameLabel] {
				b = &s.Bundles[j]
			}
		}
		var c *fleet.Cluster
		for j := range s.Clusters {
			if s.Clusters[j].Name == bd.Labels[fleet.ClusterLabel] {
				c = &s.Clusters[j]
			}
		}
		cb, err := target.Compile(b)
		if err != nil {
			panic(err)
		}
		d, ok, err := target.NewTargeter(cb, "c").Target(c, nil)
		if err != nil || !ok {
			panic(fmt.Sprintf("bundle %s does not target cluster %s: %v", b.Name, c.Name, err))
		}
		bd.Spec.DeploymentID, bd.Spec.StagedDeploymentID = d.ID, d.ID
		bd.Spec.Options, bd.Spec.StagedOptions = *d.Options.DeepCopy(), *d.Options.DeepCopy()
		bd.Status.AppliedDeploymentID = d.ID
	}
}

func TestHealthyFleetHasNoFindings(t *testing.T) {
	g := NewWithT(t)
	findings, skipped := Analyze(healthy(), Options{})
	g.Expect(findings).To(BeEmpty())
	g.Expect(skipped).To(BeEmpty())
	g.Expect(NeedsAttention(findings)).To(BeFalse())
}

func TestEachCheckFindsItsProblem(t *testing.T) {
	cases := []struct {
		name     string
		plant    func(s *Snapshot)
		check    string
		severity Severity
		object   string
		says     string
	}{
		{"offline", func(s *Snapshot) {
			s.Clusters[0].Status.Display.State = fleet.ClusterStateOffline
			s.Clusters[0].Status.Agent.LastSeen = at(3 * time.Hour)
			s.Leases[0] = lease("a", 2*time.Hour)
		}, CheckAgentOffline, Critical, "Cluster fleet-default/a", "Offline: last check-in 2h0m0s ago"},
		{"silent", func(s *Snapshot) { s.Leases[1] = lease("b", 7*time.Minute) }, CheckAgentOffline, Warning, "Cluster fleet-default/b", "silent: last check-in 7m0s ago"},
		{"never checked in", func(s *Snapshot) {
			s.Clusters[1].Status.Display.State = fleet.ClusterStateWaitCheckIn
			s.Clusters[1].Status.Agent.LastSeen = metav1.Time{}
			s.Leases = s.Leases[:1]
		}, CheckAgentOffline, Warning, "Cluster fleet-default/b", "no agent has checked in"},
		{"agent outdated", func(s *Snapshot) {
			for _, c := range []string{"a", "b", "c"} {
				b := bundle("fleet-agent-" + c)
				b.Namespace = "cluster-" + c
				b.Labels = map[string]string{fleet.AgentBundleLabel: "true"}
				b.Annotations = map[string]string{fleet.AgentImageAnnotation: "agent:v2"}
				if c == "c" {
					b.Annotations[fleet.AgentImageAnnotation] = "agent:v1"
				}
				s.Bundles = append(s.Bundles, b)
			}
		}, CheckAgentOutdated, Warning, "Bundle cluster-c/fleet-agent-c", "runs agent:v1, not agent:v2"},
		{"deploy failed", func(s *Snapshot) {
			d := &s.BundleDeployments[0]
			d.Spec.DeploymentID, d.Spec.StagedDeploymentID = "c:2", "c:2"
			d.Status.Conditions = append(d.Status.Conditions, metav1.Condition{Type: fleet.ConditionDeployed, Status: metav1.ConditionFalse, Reason: "Error", Message: "chart not found"})
		}, CheckDeployFailed, Critical, "BundleDeployment cluster-a/db", "chart not found"},
		{"stuck WaitApplied", func(s *Snapshot) {
			d := &s.BundleDeployments[1]
			d.Spec.DeploymentID, d.Spec.StagedDeploymentID = "c:2", "c:2"
		}, CheckStuckWaitApplied, Warning, "BundleDeployment cluster-b/db", "waiting to be applied on cluster fleet-default/b since 1h0m0s ago"},
		{"modified", func(s *Snapshot) {
			d := &s.BundleDeployments[2]
			d.Status.NonModified = false
			d.Status.ModifiedStatus = []fleet.ModifiedStatus{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "x", Name: "cm", Patch: `{"data":{"k":"v"}}`}}
		}, CheckModified, Warning, "BundleDeployment cluster-a/app", `configmap.v1 x/cm modified {"data":{"k":"v"}}`},
		{"rollout held", func(s *Snapshot) {
			s.BundleDeployments[2].Status.Ready = false
			s.BundleDeployments[3].Spec.StagedDeploymentID = "c:2"
		}, CheckRolloutHeld, Warning, "Bundle fleet-default/app", "previous version: fleet-default/b; not ready, and so holding it: fleet-default/a (NotReady)"},
		{"dependsOn cycle", func(s *Snapshot) {
			s.Bundles[0].Spec.DependsOn = []fleet.BundleRef{{Name: "app"}}
		}, CheckDependsOnCycle, Critical, "Bundle fleet-default/app", "app -> db -> app"},
		{"dependsOn waiting", func(s *Snapshot) {
			d := &s.BundleDeployments[3]
			d.Spec.DeploymentID, d.Spec.StagedDeploymentID = "c:2", "c:2"
			d.Status.Conditions = append(d.Status.Conditions, metav1.Condition{Type: fleet.ConditionDeployed, Status: metav1.ConditionUnknown,
				Reason: fleet.ReasonWaitingForDeps, Message: "waiting for db (NotReady)", LastTransitionTime: at(20 * time.Minute)})
		}, CheckDependsOnWaiting, Warning, "BundleDeployment cluster-b/app", "waiting for db (NotReady)"},
		{"token expiring", func(s *Snapshot) {
			exp := metav1.NewTime(now.Add(3 * time.Hour))
			s.Tokens[0].Status.Expires = &exp
		}, CheckTokenExpiring, Warning, "ClusterRegistrationToken fleet-default/t", "expires in 3h0m0s"},
		{"not imported", func(s *Snapshot) {
			s.Clusters[1].Status.Conditions = []metav1.Condition{{Type: fleet.ConditionImported, Status: metav1.ConditionFalse, Reason: fleet.ReasonKubeconfigInvalid, Message: "no server"}}
		}, CheckNotImported, Critical, "Cluster fleet-default/b", "KubeconfigInvalid"},
		{"fetch failed", func(s *Snapshot) {
			s.GitRepos[0].Status.Conditions[0] = metav1.Condition{Type: fleet.ConditionGitPolling, Status: metav1.ConditionFalse, Reason: fleet.ReasonBranchNotFound, Message: "branch x not found"}
		}, CheckGitRepoFetch, Critical, "GitRepo fleet-default/repo", "BranchNotFound"},
		{"behind", func(s *Snapshot) { s.GitRepos[0].Status.LastPollingTriggered = at(time.Hour) }, CheckGitRepoBehind, Warning, "GitRepo fleet-default/repo", "last polled 1h0m0s ago"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := healthy()
			tc.plant(s)
			findings, _ := Analyze(s, Options{})
			var mine []Finding
			for _, f := range findings {
				if f.Check == tc.check {
					mine = append(mine, f)
				}
			}
			g.Expect(mine).To(HaveLen(1), "findings: %v", findings)
			g.Expect(mine[0].Severity).To(Equal(tc.severity))
			g.Expect(mine[0].Object).To(Equal(tc.object))
			g.Expect(mine[0].Message).To(ContainSubstring(tc.says))
			g.Expect(mine[0].Action).NotTo(BeEmpty())
			g.Expect(NeedsAttention(findings)).To(BeTrue())
		})
	}
}

func TestMostUrgentFirstAndUnreadableKinds(t *testing.T) {
	g := NewWithT(t)
	s := healthy()
	s.GitRepos[0].Status.LastPollingTriggered = at(time.Hour)
	s.Clusters[0].Status.Display.State = fleet.ClusterStateOffline
	s.Unreadable = []string{KindToken}
	findings, skipped := Analyze(s, Options{})
	g.Expect(findings).To(HaveLen(2))
	g.Expect(findings[0].Severity).To(Equal(Critical))
	g.Expect(findings[1].Severity).To(Equal(Warning))
	g.Expect(strings.Join(skipped, ";")).To(Equal("token-expiring (may not list clusterregistrationtokens)"))
}

func TestNoSilentAgentsWithoutLeases(t *testing.T) {
	g := NewWithT(t)
	s := healthy()
	s.Leases, s.Unreadable = nil, []string{KindLease}
	// lastSeen is 30 minutes old (the manager writes it hourly): no finding.
	findings, _ := Analyze(s, Options{})
	g.Expect(findings).To(BeEmpty())
}

func TestFindingsReadBackFromJSON(t *testing.T) {
	g := NewWithT(t)
	in := []Finding{{Check: CheckModified, Severity: Warning, Object: "BundleDeployment a/b"}, {Check: CheckAgentOffline, Severity: Critical}}
	data, err := json.Marshal(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(ContainSubstring(`"severity":"warning"`))
	var out []Finding
	g.Expect(json.Unmarshal(data, &out)).To(Succeed())
	g.Expect(out).To(Equal(in))
	g.Expect(json.Unmarshal([]byte(`[{"severity":"urgent"}]`), &out)).To(MatchError(ContainSubstring(`unknown severity "urgent"`)))
}
