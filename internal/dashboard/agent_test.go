package dashboard

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/capienroll"
)

func agentBundle(cluster, image, hash string) fleet.Bundle {
	return fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "fleet-agent-" + cluster,
		Labels:      map[string]string{fleet.AgentBundleLabel: "true", fleet.AgentBundleHashLabel: hash},
		Annotations: map[string]string{fleet.AgentImageAnnotation: image}}}
}

func TestAgentVersion(t *testing.T) {
	b := agentBundle("c", "ghcr.io/gitfleet/fleet-agent:v0.4.0", "h2")
	ready := bd("fleet-agent-c", "c", true, "")
	ready.Labels[fleet.AgentBundleHashLabel] = "h2"
	old := bd("fleet-agent-c", "c", true, "")
	old.Labels[fleet.AgentBundleHashLabel] = "h1"
	failing := bd("fleet-agent-c", "c", false, "image pull failed")
	failing.Labels[fleet.AgentBundleHashLabel] = "h2"
	for _, tc := range []struct {
		name string
		b    *fleet.Bundle
		bd   *fleet.BundleDeployment
		want AgentVersion
		text string
	}{
		{"no agent bundle", nil, nil, AgentVersion{}, "unknown"},
		{"deployed", &b, &ready, AgentVersion{Image: "ghcr.io/gitfleet/fleet-agent:v0.4.0", Version: "v0.4.0"}, "v0.4.0"},
		{"the manager moved the bundle, the deployment not yet", &b, &old,
			AgentVersion{Image: "ghcr.io/gitfleet/fleet-agent:v0.4.0", Version: "v0.4.0", Rolling: true}, "v0.4.0 (rolling out)"},
		{"moved but failing", &b, &failing,
			AgentVersion{Image: "ghcr.io/gitfleet/fleet-agent:v0.4.0", Version: "v0.4.0", Rolling: true}, "v0.4.0 (rolling out)"},
		{"no deployment yet", &b, nil,
			AgentVersion{Image: "ghcr.io/gitfleet/fleet-agent:v0.4.0", Version: "v0.4.0", Rolling: true}, "v0.4.0 (rolling out)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := agentVersionOf(tc.b, tc.bd)
			g.Expect(got).To(Equal(tc.want))
			g.Expect(got.Text()).To(Equal(tc.text))
			g.Expect(got.Title()).NotTo(BeEmpty())
		})
	}
}

func TestImageVersion(t *testing.T) {
	g := NewWithT(t)
	g.Expect(imageVersion("registry:5000/fleet-agent:v1.2.3")).To(Equal("v1.2.3"))
	g.Expect(imageVersion("registry:5000/fleet-agent")).To(Equal("registry:5000/fleet-agent"))
	g.Expect(imageVersion("fleet-agent:dev@sha256:0123456789abcdef0123")).To(Equal("dev"))
	g.Expect(imageVersion("fleet-agent@sha256:0123456789abcdef0123")).To(Equal("sha256:0123456789ab"))
}

func TestAgentBundlesInClustersNotMatrix(t *testing.T) {
	g := NewWithT(t)
	s := testSnapshot(3)
	for _, c := range []string{"c-0000", "c-0001"} {
		s.Bundles = append(s.Bundles, agentBundle(c, "fleet-agent:v2", "h2"))
		d := bd("fleet-agent-"+c, c, true, "")
		d.Labels[fleet.AgentBundleHashLabel] = "h2"
		if c == "c-0001" {
			d.Labels[fleet.AgentBundleHashLabel] = "h1"
		}
		s.Deployments = append(s.Deployments, d)
	}
	m := BuildMatrix(s, Filter{Workspace: "ws", Page: 1}, labels.Everything())
	cols := make([]string, 0, len(m.Bundles))
	for _, b := range m.Bundles {
		cols = append(cols, b.Name)
	}
	g.Expect(cols).To(Equal([]string{"a", "b"}), "no agent Bundle column")
	v := agentVersions(s, s.cells())
	g.Expect(v[key{"ws", "c-0000"}].Text()).To(Equal("v2"))
	g.Expect(v[key{"ws", "c-0001"}].Text()).To(Equal("v2 (rolling out)"))
	g.Expect(v).NotTo(HaveKey(key{"ws", "c-0002"}))
}

func TestBuildCAPIRows(t *testing.T) {
	g := NewWithT(t)
	now := metav1.Now()
	capis := []clusterv1.Cluster{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "up", UID: "u1"},
			Status: clusterv1.ClusterStatus{Phase: "Provisioned", Conditions: []metav1.Condition{
				{Type: capienroll.ConditionFleetAgentReady, Status: metav1.ConditionTrue, Reason: fleet.ReasonRegistered, Message: "the fleet agent checks in"}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "gone", UID: "u2", Annotations: map[string]string{capienroll.UnenrolledAnnotation: "2026-01-02T03:04:05Z"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "bad", UID: "u3"},
			Status: clusterv1.ClusterStatus{Conditions: []metav1.Condition{
				{Type: capienroll.ConditionFleetAgentReady, Status: metav1.ConditionFalse, Reason: fleet.ReasonFailed, Message: "Applied: no route to host"}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "dying", UID: "u4", DeletionTimestamp: &now, Finalizers: []string{"x"}}},
	}
	fleets := []fleet.Cluster{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "up", Annotations: map[string]string{capienroll.ClusterUIDAnnotation: "u1", capienroll.ClusterNameAnnotation: "up"}}},
		// Registered by token under the same name: not the one "bad" became.
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "bad"}},
	}
	rows := BuildCAPIRows(capis, fleets)
	g.Expect(rows).To(HaveLen(4))
	by := map[string]CAPIRow{}
	for _, r := range rows {
		by[r.Name] = r
	}
	g.Expect(by["up"]).To(And(HaveField("Enrolled", true), HaveField("Class", "ok"), HaveField("Why", ""),
		HaveField("FleetName", "up"), HaveField("Condition", "True Registered")))
	g.Expect(by["gone"].Why).To(ContainSubstring("un-enrolled"))
	g.Expect(by["gone"].Class).To(Equal("none"))
	g.Expect(by["bad"]).To(And(HaveField("Class", "err"), HaveField("FleetName", ""), HaveField("Why", "Failed: Applied: no route to host")))
	g.Expect(by["dying"].Why).To(ContainSubstring("being deleted"))
}
