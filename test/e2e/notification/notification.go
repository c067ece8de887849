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
}

func (in SpecInput) validate(spec string) {
	Expect(in.Upstream).NotTo(BeNil(), "%s: SpecInput.Upstream is required", spec)
	Expect(in.Downstreams).NotTo(BeEmpty(), "%s: SpecInput.Downstreams needs a control plane", spec)
	Expect(in.Admin).NotTo(BeNil(), "%s: SpecInput.Admin is required", spec)
	Expect(in.LogDir).NotTo(BeEmpty(), "%s: SpecInput.LogDir is required", spec)
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
}

// NotificationSpec checks what a webhook Notification is told about the
// rollouts of a GitRepo deployed by a real agent: a good commit makes
// exactly one Started and one Succeeded message, a commit the agent cannot
// apply exactly one Failed naming the cluster and its error; every message
// carries a valid signature. It joins the suite's first downstream cluster
// and removes what it made when done. Call it in an Ordered container.
func NotificationSpec(ctx context.Context, inputGetter func() SpecInput) {
	f := &fixture{ctx: ctx}

	BeforeAll(func() {
		input := inputGetter()
		input.validate("NotificationSpec")
		f.admin = input.Admin
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
		f.repo, err = gittest.NewRepo(filepath.Join(root, repoName), "main")
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
		DeferCleanup(func() {
			for _, o := range []client.Object{
				&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: repoName, Namespace: ws}}, n, secret,
			} {
				Expect(client.IgnoreNotFound(f.admin.Delete(ctx, o))).To(Succeed())
			}
		})
		Expect(f.admin.Create(ctx, secret)).To(Succeed())
		Expect(f.admin.Create(ctx, n)).To(Succeed())
		// Ready before the GitRepo exists: a source first seen with its
		// rollout over is recorded without a message.
		e2e.WaitFor("the Notification Ready", func(g Gomega) {
			got := &notificationv1.Notification{}
			g.Expect(f.admin.Get(ctx, client.ObjectKeyFromObject(n), got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, "Ready")
			g.Expect(c).NotTo(BeNil(), "no Ready condition yet")
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		}, 30*time.Second, poll)
	})

	It("tells exactly one Started and one Succeeded about a good commit", func() { goodCommit(f) })
	It("tells exactly one Failed, naming the cluster and its error, about a commit that breaks the bundle", func() { brokenCommit(f) })
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

func goodCommit(f *fixture) {
	sha, err := f.repo.Commit("v1", goodFiles("v1"))
	Expect(err).NotTo(HaveOccurred())
	gr := &fleet.GitRepo{
		ObjectMeta: metav1.ObjectMeta{Name: repoName, Namespace: ws, Labels: map[string]string{"notify": "yes"}},
		Spec: fleet.GitRepoSpec{Repo: f.git.RepoURL(repoName), Branch: "main",
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
		Expect(m.Repo).To(Equal(f.git.RepoURL(repoName)))
		Expect(m.Errors).To(BeEmpty())
	}
	Expect(msgs[0].ID).NotTo(Equal(msgs[1].ID), "each event of a rollout has an id of its own")
	Expect(msgs[1].Clusters).To(Equal(notify.Clusters{Desired: 1, Ready: 1}))

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
}
