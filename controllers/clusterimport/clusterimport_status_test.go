package clusterimport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/outcome"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestImportedOutcome(t *testing.T) {
	for name, tc := range map[string]struct {
		err        error
		registered bool
		status     metav1.ConditionStatus
		reason     string
		message    string
		terminal   bool
	}{
		"applied":    {status: metav1.ConditionTrue, reason: fleet.ReasonApplied},
		"registered": {registered: true, status: metav1.ConditionTrue, reason: fleet.ReasonAgentRegistered},
		"missing": {err: outcome.Stallf(fleet.ReasonSecretNotFound, "kubeconfig Secret x not found"), status: metav1.ConditionFalse,
			reason: fleet.ReasonSecretNotFound, message: "kubeconfig Secret x not found", terminal: true},
		"unreachable": {err: remoteFailure("reading", errors.New("dial tcp: connection refused")), status: metav1.ConditionFalse,
			reason: fleet.ReasonClusterUnreachable, message: "reading: dial tcp: connection refused"},
		"wrapped": {err: fmt.Errorf("outer: %w", outcome.Waitf(fleet.ReasonAdopting, 0, "waiting")), status: metav1.ConditionFalse,
			reason: fleet.ReasonAdopting, message: "outer: waiting"},
		"manager-side": {err: errors.New("etcd timeout"), status: metav1.ConditionFalse, reason: fleet.ReasonInstallFailed, message: "etcd timeout"},
		"error wins": {err: outcome.Stallf(fleet.ReasonKubeconfigInvalid, "bad"), registered: true, status: metav1.ConditionFalse,
			reason: fleet.ReasonKubeconfigInvalid, terminal: true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Generation: 7}}
			_, err := outcome.Compute(context.Background(), importedOutcome(cluster, tc.err, tc.registered))
			g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(Equal(tc.terminal), "a stall stops until a watched object changes")
			c := conditions.Get(cluster, fleet.ConditionImported)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(tc.status))
			g.Expect(c.Reason).To(Equal(tc.reason))
			g.Expect(c.ObservedGeneration).To(Equal(int64(7)))
			g.Expect(c.Message).NotTo(BeEmpty())
			if tc.message != "" {
				g.Expect(c.Message).To(Equal(tc.message))
			}
		})
	}
}

func TestOwnedStatus(t *testing.T) {
	g := NewWithT(t)
	status := &fleet.ClusterStatus{
		AgentDeployedGeneration: ptr.To[int64](2), APIServerURL: "https://m", APIServerCAHash: "ca",
		Conditions: []metav1.Condition{
			{Type: fleet.ConditionReady, Status: metav1.ConditionTrue, Reason: fleet.ReasonReady},
			{Type: fleet.ConditionImported, Status: metav1.ConditionTrue, Reason: fleet.ReasonApplied},
		},
		Agent: fleet.AgentStatus{LastSeen: metav1.NewTime(t0)},
	}
	owned := ownedStatus(status)
	g.Expect(owned.Conditions).To(HaveLen(1), "only the Imported condition: the others have their own writers")
	g.Expect(owned.Conditions[0].Type).To(Equal(fleet.ConditionImported))
	g.Expect(owned.APIServerURL).To(Equal("https://m"))
	g.Expect(*owned.AgentDeployedGeneration).To(Equal(int64(2)))

	b, err := json.Marshal(ownedStatus(&fleet.ClusterStatus{}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal("{}"), "nothing recorded yet: nothing applied")
}

func TestRemoteFailure(t *testing.T) {
	gr := schema.GroupResource{Resource: "deployments"}
	for name, tc := range map[string]struct {
		err      error
		reason   string
		stalling bool
		waiting  bool
	}{
		"unauthorized": {err: apierrors.NewUnauthorized("no"), reason: fleet.ReasonKubeconfigInvalid, stalling: true},
		"forbidden":    {err: apierrors.NewForbidden(gr, "x", errors.New("no")), reason: fleet.ReasonInstallFailed, stalling: true},
		"invalid":      {err: apierrors.NewInvalid(schema.GroupKind{Kind: "Deployment"}, "x", nil), reason: fleet.ReasonInstallFailed, stalling: true},
		"bad request":  {err: apierrors.NewBadRequest("no"), reason: fleet.ReasonInstallFailed, stalling: true},
		"server error": {err: apierrors.NewInternalError(errors.New("boom")), reason: fleet.ReasonInstallFailed},
		"timeout":      {err: context.DeadlineExceeded, reason: fleet.ReasonClusterUnreachable, waiting: true},
		"refused":      {err: errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), reason: fleet.ReasonClusterUnreachable, waiting: true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := remoteFailure("installing the agent", tc.err)
			g.Expect(outcome.ReasonOf(err, fleet.ReasonInstallFailed)).To(Equal(tc.reason))
			g.Expect(outcome.IsStalling(err)).To(Equal(tc.stalling))
			g.Expect(outcome.IsWaiting(err)).To(Equal(tc.waiting))
			g.Expect(err.Error()).To(HavePrefix("installing the agent: "))
			if tc.reason != fleet.ReasonKubeconfigInvalid {
				g.Expect(errors.Is(err, tc.err)).To(BeTrue(), "the cause stays inspectable")
			}
		})
	}
}

func TestAgentRegistered(t *testing.T) {
	stale := 15 * time.Minute
	for name, tc := range map[string]struct {
		lastSeen, restartedAt time.Time
		want                  bool
	}{
		"never seen":               {restartedAt: t0.Add(-time.Minute)},
		"seen after restart":       {lastSeen: t0.Add(-time.Minute), restartedAt: t0.Add(-2 * time.Minute), want: true},
		"seen in the same second":  {lastSeen: t0.Add(-time.Minute), restartedAt: t0.Add(-time.Minute + 300*time.Millisecond), want: true},
		"seen before restart":      {lastSeen: t0.Add(-3 * time.Minute), restartedAt: t0.Add(-2 * time.Minute)},
		"seen long ago":            {lastSeen: t0.Add(-stale), restartedAt: t0.Add(-time.Hour)},
		"no restart on record":     {lastSeen: t0.Add(-time.Second), want: true},
		"just within the deadline": {lastSeen: t0.Add(-stale + time.Second), want: true},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(AgentRegistered(tc.lastSeen, tc.restartedAt, t0, stale)).To(Equal(tc.want))
		})
	}
}

func TestDecide(t *testing.T) {
	stale := 15 * time.Minute
	want := Wanted{SettingsHash: "h1", Generation: 2, APIServerURL: "https://m", APIServerCAHash: "ca"}
	recorded := func(gen int64, lastSeen time.Time) fleet.ClusterStatus {
		return fleet.ClusterStatus{AgentDeployedGeneration: ptr.To(gen), APIServerURL: "https://m", APIServerCAHash: "ca",
			Agent: fleet.AgentStatus{LastSeen: metav1.NewTime(lastSeen)}}
	}
	fresh := Deployed{Exists: true, SettingsHash: "h1", RestartedAt: t0.Add(-time.Hour)}
	for name, tc := range map[string]struct {
		deployed Deployed
		status   fleet.ClusterStatus
		want     Decision
	}{
		"first install":      {deployed: Deployed{}, want: Decision{Reason: InstallAgentMissing, Restart: true}},
		"deployment deleted": {deployed: Deployed{}, status: recorded(2, t0), want: Decision{Reason: InstallAgentMissing, Restart: true}},
		"up to date":         {deployed: fresh, status: recorded(2, t0.Add(-time.Minute))},
		"redeploy bumped":    {deployed: fresh, status: recorded(1, t0), want: Decision{Reason: InstallRedeployRequested, Restart: true}},
		"settings changed":   {deployed: Deployed{Exists: true, SettingsHash: "h0"}, status: recorded(2, t0), want: Decision{Reason: InstallSettingsChanged}},
		"stale heartbeat":    {deployed: fresh, status: recorded(2, t0.Add(-stale)), want: Decision{Reason: InstallAgentStale, Restart: true}},
		"never checked in":   {deployed: Deployed{Exists: true, SettingsHash: "h1", RestartedAt: t0.Add(-stale - time.Second)}, status: recorded(2, time.Time{}), want: Decision{Reason: InstallAgentStale, Restart: true}},
		"recently restarted": {deployed: Deployed{Exists: true, SettingsHash: "h1", RestartedAt: t0.Add(-time.Minute)}, status: recorded(2, t0.Add(-time.Hour))},
		"moved here from another manager": {deployed: Deployed{Exists: true, SettingsHash: "h1", RestartedAt: t0.Add(-time.Minute)}, status: fleet.ClusterStatus{},
			want: Decision{Reason: InstallAgentElsewhere, Restart: true}},
		"installed by someone": {deployed: Deployed{Exists: true, RestartedAt: t0}, status: fleet.ClusterStatus{Agent: fleet.AgentStatus{LastSeen: metav1.NewTime(t0)}}, want: Decision{Reason: InstallNotRecorded}},
		"manager moved": {deployed: fresh, status: fleet.ClusterStatus{AgentDeployedGeneration: ptr.To[int64](2), APIServerURL: "https://old", APIServerCAHash: "ca",
			Agent: fleet.AgentStatus{LastSeen: metav1.NewTime(t0)}}, want: Decision{Reason: InstallAPIServerChanged, Restart: true}},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Decide(tc.deployed, want, tc.status, t0, stale)).To(Equal(tc.want))
		})
	}
}

func TestNextCheck(t *testing.T) {
	g := NewWithT(t)
	stale, every := 15*time.Minute, 5*time.Minute
	g.Expect(NextCheck(t0, time.Time{}, t0, stale, every)).To(Equal(every))
	g.Expect(NextCheck(t0.Add(-13*time.Minute), time.Time{}, t0, stale, every)).To(Equal(2*time.Minute + time.Second))
	g.Expect(NextCheck(t0.Add(-time.Hour), t0.Add(-14*time.Minute), t0, stale, every)).To(Equal(time.Minute + time.Second))
	g.Expect(NextCheck(t0.Add(-time.Hour), time.Time{}, t0, stale, every)).To(Equal(every), "already stale: healed on this pass, look again later")
}

func TestSettingsHash(t *testing.T) {
	g := NewWithT(t)
	base := agentinstall.Options{Namespace: "fleet-system", Config: &agentinstall.AgentConfig{Labels: map[string]string{"env": "dev"}, ClientID: "id"}}
	h := SettingsHash(base)
	g.Expect(h).To(HaveLen(16))

	withToken := base
	withToken.Bootstrap = &agentinstall.Bootstrap{Token: "secret"}
	g.Expect(SettingsHash(withToken)).To(Equal(h), "the token is not a setting")

	for name, change := range map[string]func(o *agentinstall.Options){
		"namespace": func(o *agentinstall.Options) { o.Namespace = "other" },
		"labels": func(o *agentinstall.Options) {
			o.Config = &agentinstall.AgentConfig{Labels: map[string]string{"env": "prod"}, ClientID: "id"}
		},
		"tolerations": func(o *agentinstall.Options) { o.Tolerations = []corev1.Toleration{{Key: "k"}} },
		"host net":    func(o *agentinstall.Options) { o.HostNetwork = true },
		"registry":    func(o *agentinstall.Options) { o.PrivateRepoURL = "reg.local" },
		"env":         func(o *agentinstall.Options) { o.EnvVars = []corev1.EnvVar{{Name: "A", Value: "b"}} },
	} {
		o := base
		change(&o)
		g.Expect(SettingsHash(o)).NotTo(Equal(h), name)
	}
}

func TestCAHash(t *testing.T) {
	g := NewWithT(t)
	g.Expect(CAHash(nil)).To(BeEmpty())
	g.Expect(CAHash([]byte("ca"))).To(HaveLen(64))
	g.Expect(CAHash([]byte("ca"))).NotTo(Equal(CAHash([]byte("other"))))
}

func TestPredicate(t *testing.T) {
	g := NewWithT(t)
	p := Predicate()
	imported := func(reason string, lastSeen time.Time) *fleet.Cluster {
		c := &fleet.Cluster{Spec: fleet.ClusterSpec{KubeConfigSecret: "kc"}}
		c.Status.Agent.LastSeen = metav1.NewTime(lastSeen)
		c.Status.Conditions = []metav1.Condition{{Type: fleet.ConditionImported, Reason: reason}}
		return c
	}
	g.Expect(p.Create(event.CreateEvent{Object: &fleet.Cluster{}})).To(BeFalse(), "not imported")
	g.Expect(p.Create(event.CreateEvent{Object: imported("", time.Time{})})).To(BeTrue())
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: imported(fleet.ReasonAgentRegistered, t0), ObjectNew: imported(fleet.ReasonAgentRegistered, t0.Add(time.Minute))})).
		To(BeFalse(), "heartbeats of a registered agent are ignored")
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: imported(fleet.ReasonApplied, time.Time{}), ObjectNew: imported(fleet.ReasonApplied, t0)})).
		To(BeTrue(), "the check-in awaited after an install")
	dropped := imported(fleet.ReasonAgentRegistered, t0)
	dropped.Status.Conditions = nil
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: imported(fleet.ReasonKubeconfigInvalid, t0), ObjectNew: dropped})).
		To(BeTrue(), "another writer dropped the Imported condition: write it again")
	relabelled := imported(fleet.ReasonAgentRegistered, t0)
	relabelled.Labels = map[string]string{"env": "prod"}
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: imported(fleet.ReasonAgentRegistered, t0), ObjectNew: relabelled})).To(BeTrue())
}

func TestSecretNamespaceAllowed(t *testing.T) {
	for name, tc := range map[string]struct {
		cluster, secret string
		allowed         []string
		want            bool
	}{
		"own namespace":              {cluster: "a", secret: "a", want: true},
		"another, none allowed":      {cluster: "a", secret: "b"},
		"another, not listed":        {cluster: "a", secret: "b", allowed: []string{"c"}},
		"another, listed":            {cluster: "a", secret: "b", allowed: []string{"c", "b"}, want: true},
		"own namespace, list absent": {cluster: "a", secret: "a", allowed: []string{"b"}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(SecretNamespaceAllowed(tc.cluster, tc.secret, tc.allowed)).To(Equal(tc.want))
		})
	}
}

func TestMayAdopt(t *testing.T) {
	for name, tc := range map[string]struct {
		clientID, uid string
		adoptable     int
		want          bool
	}{
		"nothing to adopt":             {clientID: "victim", uid: "mine", want: true},
		"the kubeconfig reaches it":    {clientID: "u1", uid: "u1", adoptable: 1, want: true},
		"a spoofed clientID":           {clientID: "victim", uid: "mine", adoptable: 1},
		"a custom clientID, not a UID": {clientID: "custom", uid: "u1", adoptable: 2},
		"no identity at all":           {adoptable: 1},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(MayAdopt(tc.clientID, tc.uid, tc.adoptable)).To(Equal(tc.want))
		})
	}
}

// The manager installs the local agent with its own credential, which may
// not read PriorityClasses: whatever the local Cluster asks, the
// PriorityClass is never removed by it, the PodDisruptionBudget follows the
// spec. Remote clusters follow the spec for both.
func TestLocalSchedulingKeepsThePriorityClass(t *testing.T) {
	g := NewWithT(t)
	pdb := &fleet.AgentSchedulingCustomization{PodDisruptionBudget: &fleet.PodDisruptionBudgetSpec{}}
	g.Expect(localScheduling(false, nil)).To(BeNil())
	g.Expect(localScheduling(false, pdb)).To(BeIdenticalTo(pdb))
	keep := localScheduling(true, nil)
	g.Expect(keep.PriorityClass).NotTo(BeNil())
	g.Expect(keep.PodDisruptionBudget).To(BeNil())
	keep = localScheduling(true, pdb)
	g.Expect(keep.PriorityClass).NotTo(BeNil())
	g.Expect(keep.PodDisruptionBudget).NotTo(BeNil())
	g.Expect(pdb.PriorityClass).To(BeNil(), "the Cluster's spec is not changed")
}
