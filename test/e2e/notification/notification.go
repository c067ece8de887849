package notification

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notificationv1 "github.com/gitfleet/fleet/api/notification/v1alpha1"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/notify"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

const (
	ws       = fleet.DefaultWorkspace
	repoName = "notified"
	// repoPath is where the git server serves the repository: an owner
	// and a name, as commit statuses need.
	repoPath = "example/" + repoName
	// registerTimeout bounds the agent's registration, rolloutTimeout a
	// commit's way from the git server to a message.
	registerTimeout = 90 * time.Second
	rolloutTimeout  = 90 * time.Second
	// quiet is how long nothing more may arrive once a rollout was told.
	quiet = 5 * time.Second
	poll  = 250 * time.Millisecond
)

// SpecInput is what NotificationSpec runs against.
type SpecInput struct {
	Upstream    *controlplane.ControlPlane
	Downstreams []*controlplane.ControlPlane
	Admin       client.Client
	LogDir      string
	// RestartManager stops the manager and starts a new one, with nothing
	// in memory of the old one.
	RestartManager func()
}

func (in SpecInput) validate(spec string) {
	Expect(in.Upstream).NotTo(BeNil(), "%s: SpecInput.Upstream is required", spec)
	Expect(in.Downstreams).NotTo(BeEmpty(), "%s: SpecInput.Downstreams needs a control plane", spec)
	Expect(in.Admin).NotTo(BeNil(), "%s: SpecInput.Admin is required", spec)
	Expect(in.LogDir).NotTo(BeEmpty(), "%s: SpecInput.LogDir is required", spec)
	Expect(in.RestartManager).NotTo(BeNil(), "%s: SpecInput.RestartManager is required", spec)
}

// goodFiles is the repository at one version: a ConfigMap saying it.
func goodFiles(version string) map[string]string {
	return map[string]string{
		"fleet.yaml": "defaultNamespace: notified\n",
		"cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notified\ndata:\n  version: " + version + "\n",
	}
}

// brokenFiles break the bundle on every cluster: a manifest of a kind no
// API server serves, which the agent fails to apply.
func brokenFiles() map[string]string {
	return map[string]string{
		"bad.yaml": "apiVersion: example.com/v1\nkind: NoSuchKind\nmetadata: {name: bad}\n",
	}
}

type fixture struct {
	ctx      context.Context
	admin    client.Client
	cluster  *e2e.JoinedCluster
	repo     *gittest.Repo
	git      *gittest.Server
	receiver *receiver
	// chats are the Slack and Teams destinations; statuses the commit
	// status APIs, with the states each is told for Started, Succeeded
	// and Failed.
	chats    []*destination
	statuses []statusDestination
	restart  func()
}

// statusDestination is a commit-status API and its states.
type statusDestination struct {
	*destination
	pending, success, failure string
}

// NotificationSpec checks what Notifications of every kind of destination
// (the generic webhook, Slack, Teams, and the commit statuses of GitHub,
// GitLab and Gitea) are told about the rollouts of a GitRepo deployed by a
// real agent, each to a loopback receiver that checks the destination's
// documented payload and its signature or auth header: a good commit makes
// exactly one Started and one Succeeded message per destination, and a
// pending then a success status; a manager restarted mid-rollout sends
// nothing twice; a commit the agent cannot apply makes exactly one Failed
// naming the cluster and its error, and a failure status. It joins the
// suite's first downstream cluster and removes what it made when done. Call
// it in an Ordered container.
func NotificationSpec(ctx context.Context, inputGetter func() SpecInput) {
	f := &fixture{ctx: ctx}

	BeforeAll(func() {
		input := inputGetter()
		input.validate("NotificationSpec")
		f.admin = input.Admin
		f.restart = input.RestartManager
		f.cluster = e2e.Join(ctx, e2e.JoinInput{Upstream: input.Upstream, Downstream: input.Downstreams[0], Admin: f.admin,
			LogDir: input.LogDir, SystemNamespace: "notified-system",
			AgentArgs:  []string{"--checkin-interval", "5s", "--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "30s"},
			ConfigArgs: []string{"--client-id", "notified", "-l", "notify=yes"},
		}, registerTimeout)
		DeferCleanup(func() {
			f.cluster.StopAgents()
			Expect(client.IgnoreNotFound(f.admin.Delete(ctx, f.cluster.Cluster))).To(Succeed())
		})

		root, err := os.MkdirTemp("", "fleet-e2e-notified-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, root)
		f.repo, err = gittest.NewRepo(filepath.Join(root, filepath.FromSlash(repoPath)), "main")
		Expect(err).NotTo(HaveOccurred())
		f.git = gittest.NewServer(root)
		DeferCleanup(f.git.Close)

		key := make([]byte, 32)
		_, err = rand.Read(key)
		Expect(err).NotTo(HaveOccurred())
		f.receiver = newReceiver(key)
		DeferCleanup(f.receiver.Close)

		// The address is in the Secret, as incoming-webhook URLs are
		// credentials; the manager's outbound policy allows loopback here
		// (framework.AllowLoopback).
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "notified-hook", Namespace: ws},
			StringData: map[string]string{"address": f.receiver.URL, "hmacKey": string(key)}}
		n := &notificationv1.Notification{
			ObjectMeta: metav1.ObjectMeta{Name: "notified", Namespace: ws},
			Spec: notificationv1.NotificationSpec{
				Sources: notificationv1.Sources{Kinds: []notificationv1.SourceKind{notificationv1.KindGitRepo},
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"notify": "yes"}}},
				Destination: notificationv1.Destination{Type: notificationv1.DestinationWebhook,
					SecretRef: &notificationv1.LocalObjectReference{Name: secret.Name}},
			},
		}
		objs := make([]client.Object, 0, 13)
		objs = append(objs, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: repoName, Namespace: ws}}, n, secret)
		DeferCleanup(func() {
			for _, o := range objs {
				Expect(client.IgnoreNotFound(f.admin.Delete(ctx, o))).To(Succeed())
			}
		})
		Expect(f.admin.Create(ctx, secret)).To(Succeed())
		Expect(f.admin.Create(ctx, n)).To(Succeed())

		// The other destinations, each a Notification with its Secret.
		slack, teams := slackDestination(), teamsDestination()
		github := commitStatusDestination("github", "/repos/"+repoPath+"/statuses/",
			map[string]string{"Authorization": "Bearer gh-token", "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"},
			"context", "fleet/"+repoName, []string{"pending", "success", "failure"})
		gitlab := commitStatusDestination("gitlab", "/api/v4/projects/example%2F"+repoName+"/statuses/",
			map[string]string{"PRIVATE-TOKEN": "gl-token"}, "name", "fleet/"+repoName, []string{"running", "success", "failed"})
		gitea := commitStatusDestination("gitea", "/api/v1/repos/"+repoPath+"/statuses/",
			map[string]string{"Authorization": "token gitea-token"}, "context", "fleet/"+repoName, []string{"pending", "success", "failure"})
		f.chats = []*destination{slack, teams}
		f.statuses = []statusDestination{
			{destination: github, pending: "pending", success: "success", failure: "failure"},
			{destination: gitlab, pending: "running", success: "success", failure: "failed"},
			{destination: gitea, pending: "pending", success: "success", failure: "failure"},
		}
		for _, d := range []struct {
			dest    *destination
			typ     notificationv1.DestinationType
			address string
			secret  map[string]string
		}{
			{slack, notificationv1.DestinationSlack, "", map[string]string{"address": slack.URL + slackPath}},
			{teams, notificationv1.DestinationMSTeams, "", map[string]string{"address": teams.URL + "/workflows/abc/triggers/manual"}},
			{github, notificationv1.DestinationGitHub, github.URL, map[string]string{"token": "gh-token"}},
			{gitlab, notificationv1.DestinationGitLab, gitlab.URL, map[string]string{"token": "gl-token"}},
			{gitea, notificationv1.DestinationGitea, gitea.URL, map[string]string{"token": "gitea-token"}},
		} {
			DeferCleanup(d.dest.Close)
			name := "notified-" + d.dest.name
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws}, StringData: d.secret}
			dn := &notificationv1.Notification{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws},
				Spec: notificationv1.NotificationSpec{
					Sources: n.Spec.Sources,
					Destination: notificationv1.Destination{Type: d.typ, Address: d.address,
						SecretRef: &notificationv1.LocalObjectReference{Name: name}},
				}}
			objs = append(objs, dn, sec)
			Expect(f.admin.Create(ctx, sec)).To(Succeed())
			Expect(f.admin.Create(ctx, dn)).To(Succeed())
		}
		// Ready before the GitRepo exists: a source first seen with its
		// rollout over is recorded without a message.
		for _, o := range objs {
			if _, ok := o.(*notificationv1.Notification); !ok {
				continue
			}
			e2e.WaitFor("the Notification "+o.GetName()+" Ready", func(g Gomega) {
				got := &notificationv1.Notification{}
				g.Expect(f.admin.Get(ctx, client.ObjectKeyFromObject(o), got)).To(Succeed())
				c := meta.FindStatusCondition(got.Status.Conditions, "Ready")
				g.Expect(c).NotTo(BeNil(), "no Ready condition yet")
				g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
			}, 30*time.Second, poll)
		}
	})

	It("tells exactly one Started and one Succeeded about a good commit, on every destination", func() { goodCommit(f) })
	It("sends nothing twice when the manager restarts mid-rollout", func() { restartMidRollout(f) })
	It("tells exactly one Failed, naming the cluster and its error, about a commit that breaks the bundle, on every destination", func() { brokenCommit(f) })
}

// commitSeen waits for the GitRepo to have fetched sha.
func (f *fixture) commitSeen(sha string) {
	GinkgoHelper()
	e2e.WaitFor("the GitRepo at "+sha, func(g Gomega) {
		gr := &fleet.GitRepo{}
		g.Expect(f.admin.Get(f.ctx, client.ObjectKey{Namespace: ws, Name: repoName}, gr)).To(Succeed())
		g.Expect(gr.Status.Commit).To(Equal(sha))
	}, rolloutTimeout, poll)
}

// told waits until the messages about sha are want, then checks that
// nothing more about it arrives for a while. It returns them.
func (f *fixture) told(sha string, want ...string) []notify.Message {
	GinkgoHelper()
	e2e.WaitFor("the messages "+strings.Join(want, ", ")+" about "+sha, func(g Gomega) {
		g.Expect(f.receiver.refused()).To(BeEmpty(), "requests the receiver refused")
		g.Expect(f.receiver.events(sha)).To(Equal(want), "all messages: %+v", f.receiver.received())
	}, rolloutTimeout, poll)
	e2e.HoldsFor("no further message about "+sha, func(g Gomega) {
		g.Expect(f.receiver.refused()).To(BeEmpty(), "requests the receiver refused")
		g.Expect(f.receiver.events(sha)).To(Equal(want))
	}, quiet, poll)
	var out []notify.Message
	for _, m := range f.receiver.received() {
		if m.Revision == sha {
			out = append(out, m)
		}
	}
	return out
}

// everyoneTold waits until the chats were told events and the commit
// statuses set to states about sha (the webhook is told's), then checks
// that nothing more about it arrives for a while.
func (f *fixture) everyoneTold(sha string, events []string, states func(statusDestination) []string) {
	GinkgoHelper()
	check := func(g Gomega) {
		for _, d := range f.chats {
			g.Expect(d.refused()).To(BeEmpty(), "requests %s refused", d.name)
			g.Expect(d.keys(sha)).To(Equal(events), "%s was told", d.name)
		}
		for _, d := range f.statuses {
			g.Expect(d.refused()).To(BeEmpty(), "requests %s refused", d.name)
			g.Expect(d.keys(sha)).To(Equal(states(d)), "%s statuses", d.name)
		}
	}
	e2e.WaitFor("every destination told "+strings.Join(events, ", ")+" about "+sha, check, rolloutTimeout, poll)
	e2e.HoldsFor("no further message about "+sha+" on any destination", check, quiet, poll)
}

func goodCommit(f *fixture) {
	sha, err := f.repo.Commit("v1", goodFiles("v1"))
	Expect(err).NotTo(HaveOccurred())
	gr := &fleet.GitRepo{
		ObjectMeta: metav1.ObjectMeta{Name: repoName, Namespace: ws, Labels: map[string]string{"notify": "yes"}},
		Spec: fleet.GitRepoSpec{Repo: f.git.RepoURL(repoPath), Branch: "main",
			PollingInterval: &metav1.Duration{Duration: 2 * time.Second},
			Targets: []fleet.GitTarget{{Name: "notified",
				ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"notify": "yes"}}}},
		},
	}
	Expect(f.admin.Create(f.ctx, gr)).To(Succeed())
	f.commitSeen(sha)

	msgs := f.told(sha, string(notificationv1.EventStarted), string(notificationv1.EventSucceeded))
	for _, m := range msgs {
		Expect(m.Version).To(Equal("v1"))
		Expect(m.Namespace).To(Equal(ws))
		Expect(m.Kind).To(Equal("GitRepo"))
		Expect(m.Name).To(Equal(repoName))
		Expect(m.Repo).To(Equal(f.git.RepoURL(repoPath)))
		Expect(m.Errors).To(BeEmpty())
	}
	Expect(msgs[0].ID).NotTo(Equal(msgs[1].ID), "each event of a rollout has an id of its own")
	Expect(msgs[1].Clusters).To(Equal(notify.Clusters{Desired: 1, Ready: 1}))
	f.everyoneTold(sha, []string{"Started", "Succeeded"}, func(d statusDestination) []string { return []string{d.pending, d.success} })

	e2e.WaitFor("the rollout recorded in the Notification's status", func(g Gomega) {
		n := &notificationv1.Notification{}
		g.Expect(f.admin.Get(f.ctx, client.ObjectKey{Namespace: ws, Name: "notified"}, n)).To(Succeed())
		g.Expect(n.Status.Rollouts).To(HaveLen(1))
		r := n.Status.Rollouts[0]
		g.Expect(r.Revision).To(Equal(sha))
		g.Expect(r.Sent).To(Equal([]string{"Started", "Succeeded"}))
	}, 10*time.Second, poll)
}

func brokenCommit(f *fixture) {
	clusterName := f.cluster.Cluster.Name
	sha, err := f.repo.Commit("break the bundle", brokenFiles())
	Expect(err).NotTo(HaveOccurred())
	f.commitSeen(sha)
	e2e.WaitFor("the agent failing to apply "+sha, func(g Gomega) {
		bds := &fleet.BundleDeploymentList{}
		g.Expect(f.admin.List(f.ctx, bds, client.InNamespace(f.cluster.Cred.ClusterNamespace))).To(Succeed())
		g.Expect(bds.Items).To(HaveLen(1))
		bd := &bds.Items[0]
		g.Expect(summary.State(bd)).To(Equal(fleet.ErrApplied), "%s: %s", bd.Name, summary.Message(bd))
	}, rolloutTimeout, poll)

	msgs := f.told(sha, string(notificationv1.EventStarted), string(notificationv1.EventFailed))
	failed := msgs[1]
	Expect(failed.Errors).NotTo(BeEmpty())
	cluster := f.cluster.Cluster.Namespace + "/" + clusterName
	Expect(failed.Errors[0].Cluster).To(Equal(cluster))
	Expect(failed.Errors[0].State).To(Equal(string(fleet.ErrApplied)))
	Expect(failed.Errors[0].Message).To(ContainSubstring("NoSuchKind"))
	Expect(failed.Text).To(ContainSubstring(cluster))
	Expect(failed.Deployments.ErrApplied).To(Equal(1))

	f.everyoneTold(sha, []string{"Started", "Failed"}, func(d statusDestination) []string { return []string{d.pending, d.failure} })
	for _, d := range f.chats {
		texts := d.texts(sha)
		Expect(texts[1]).To(ContainSubstring(cluster+": "), "%s's Failed message names the cluster", d.name)
		Expect(texts[1]).To(ContainSubstring("NoSuchKind"), "%s's Failed message has the error", d.name)
	}
	for _, d := range f.statuses {
		Expect(d.texts(sha)[1]).To(HavePrefix("Failed: commit "+sha[:12]), "%s's failure status says why", d.name)
	}
}

// restartMidRollout stops the agent so that a good commit's rollout stays
// in progress, waits for every destination to be told it started, restarts
// the manager, and lets the agent finish: every destination is told
// exactly one Started and one Succeeded (one pending, one success), none
// of them again after the restart.
func restartMidRollout(f *fixture) {
	f.cluster.StopAgents()
	sha, err := f.repo.Commit("v2", goodFiles("v2"))
	Expect(err).NotTo(HaveOccurred())
	f.commitSeen(sha)
	started := func(g Gomega) {
		g.Expect(f.receiver.events(sha)).To(Equal([]string{"Started"}))
		for _, d := range f.chats {
			g.Expect(d.keys(sha)).To(Equal([]string{"Started"}), "%s was told", d.name)
		}
		for _, d := range f.statuses {
			g.Expect(d.keys(sha)).To(Equal([]string{d.pending}), "%s statuses", d.name)
		}
	}
	e2e.WaitFor("every destination told Started about "+sha, started, rolloutTimeout, poll)

	f.restart()
	// The new manager reads what the old one sent: nothing again.
	e2e.HoldsFor("nothing told twice after the restart", started, quiet, poll)
	Expect(f.receiver.refused()).To(BeEmpty())

	f.cluster.StartAgent()
	f.told(sha, string(notificationv1.EventStarted), string(notificationv1.EventSucceeded))
	f.everyoneTold(sha, []string{"Started", "Succeeded"}, func(d statusDestination) []string { return []string{d.pending, d.success} })
}
