package notification_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/notify"
)

const (
	commitA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	commitB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// setCommit writes the GitRepo's status.commit, as the gitrepo controller
// does once the commit's Bundles are written.
func setCommit(ctx context.Context, g Gomega, repo *fleet.GitRepo, commit string) {
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(repo), repo)).To(Succeed())
	repo.Status.Commit = commit
	g.Expect(env.Status().Update(ctx, repo)).To(Succeed())
}

// setBundle labels the Bundle with the commit and writes its status for
// its generation, as the gitrepo and bundle controllers do.
func setBundle(ctx context.Context, g Gomega, b *fleet.Bundle, commit string, sum fleet.BundleSummary) {
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
	b.Labels[fleet.CommitLabel] = commit
	g.Expect(env.Update(ctx, b)).To(Succeed())
	b.Status.Summary = sum
	b.Status.ObservedGeneration = b.Generation
	g.Expect(env.Status().Update(ctx, b)).To(Succeed())
}

func waitingSummary() fleet.BundleSummary {
	return fleet.BundleSummary{DesiredReady: 2, WaitApplied: 2, NonReadyResources: []fleet.NonReadyResource{
		{Name: "fleet-default/edge-1", State: fleet.WaitApplied}, {Name: "fleet-default/edge-2", State: fleet.WaitApplied}}}
}

func readySummary() fleet.BundleSummary { return fleet.BundleSummary{DesiredReady: 2, Ready: 2} }

// A good commit gives exactly one Started and one Succeeded message, signed,
// and a pending then a success commit status; a manager restarted between
// the two sends neither twice. A commit that fails on one cluster gives one
// Failed message naming the cluster and its error, and a failure status.
func TestOneMessagePerTransitionAcrossRestarts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "rollouts")
	g.Expect(err).NotTo(HaveOccurred())
	hook, gh := newReceiver(t), newReceiver(t)
	key := []byte("s3cret-hmac-key")
	g.Expect(env.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns.Name},
		Data: map[string][]byte{notification.SecretKeyHMAC: key, notification.SecretKeyAddress: []byte(hook.URL + "/hook")}})).To(Succeed())
	g.Expect(env.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gh", Namespace: ns.Name},
		Data: map[string][]byte{notification.SecretKeyToken: []byte("ghp_token")}})).To(Succeed())
	for _, n := range []*notification.Notification{
		{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns.Name}, Spec: notification.NotificationSpec{
			Sources:     notification.Sources{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
			Destination: notification.Destination{Type: notification.DestinationWebhook, SecretRef: &notification.LocalObjectReference{Name: "hook"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "github", Namespace: ns.Name}, Spec: notification.NotificationSpec{
			Destination: notification.Destination{Type: notification.DestinationGitHub, Address: gh.URL, SecretRef: &notification.LocalObjectReference{Name: "gh"}}}},
	} {
		g.Expect(env.Create(ctx, n)).To(Succeed())
	}
	repo := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns.Name, Labels: map[string]string{"team": "a"}},
		Spec: fleet.GitRepoSpec{Repo: "https://github.com/example/app.git"}}
	g.Expect(env.Create(ctx, repo)).To(Succeed())
	other := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns.Name, Labels: map[string]string{"team": "b"}},
		Spec: fleet.GitRepoSpec{Repo: "https://github.com/example/other.git"}}
	g.Expect(env.Create(ctx, other)).To(Succeed())
	bundle := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app-web", Namespace: ns.Name, Labels: map[string]string{fleet.RepoLabel: "app"}}}
	g.Expect(env.Create(ctx, bundle)).To(Succeed())
	otherBundle := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "other-web", Namespace: ns.Name, Labels: map[string]string{fleet.RepoLabel: "other"}}}
	g.Expect(env.Create(ctx, otherBundle)).To(Succeed())

	stop := startManager(t)

	// Commit A: its Bundle is written and waits for the agents.
	setBundle(ctx, g, bundle, commitA, waitingSummary())
	setCommit(ctx, g, repo, commitA)
	g.Eventually(func(g Gomega) {
		g.Expect(events(hook.messages(g, key))).To(Equal("Started@" + commitA[:12]))
	}, timeout, 100*time.Millisecond).Should(Succeed())
	started := hook.messages(g, key)[0]
	g.Expect([]string{started.Namespace, started.Kind, started.Name, started.Revision}).To(Equal([]string{ns.Name, "GitRepo", "app", commitA}))
	g.Expect(started.Clusters).To(Equal(notify.Clusters{Desired: 2, Ready: 0}))
	g.Expect(started.CommitURL).To(Equal("https://github.com/example/app/commit/" + commitA))

	// The manager restarts mid-rollout, once both destinations were told
	// and it recorded so; the rollout ends with the next one.
	g.Eventually(func(g Gomega) { g.Expect(gh.all()).To(HaveLen(1)) }, timeout, 100*time.Millisecond).Should(Succeed())
	// What a Notification recorded as sent about a source's rollout.
	sent := func(name, source string) func(g Gomega) []string {
		return func(g Gomega) []string {
			n := &notification.Notification{}
			g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name}, n)).To(Succeed())
			for _, rec := range n.Status.Rollouts {
				if rec.Name == source {
					return rec.Sent
				}
			}
			return nil
		}
	}
	for _, name := range []string{"hook", "github"} {
		g.Eventually(sent(name, "app"), timeout, 100*time.Millisecond).Should(ContainElement(string(notification.EventStarted)), name)
	}
	stop()
	stop = startManager(t)
	setBundle(ctx, g, otherBundle, commitA, waitingSummary()) // a source the hook does not select
	setCommit(ctx, g, other, commitA)
	setBundle(ctx, g, bundle, commitA, readySummary())
	g.Eventually(func(g Gomega) {
		g.Expect(events(hook.messages(g, key))).To(Equal("Started@" + commitA[:12] + ",Succeeded@" + commitA[:12]))
	}, timeout, 100*time.Millisecond).Should(Succeed())
	g.Eventually(sent("hook", "app"), timeout, 100*time.Millisecond).Should(ContainElement(string(notification.EventSucceeded)))
	g.Eventually(sent("github", "app"), timeout, 100*time.Millisecond).Should(ContainElement(string(notification.EventSucceeded)))
	g.Eventually(sent("github", "other"), timeout, 100*time.Millisecond).Should(ContainElement(string(notification.EventStarted)))
	stop()
	startManager(t)
	g.Consistently(func(g Gomega) {
		g.Expect(hook.all()).To(HaveLen(2))
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed())

	// GitHub got pending then success on commit A, and pending for the
	// other repository.
	statuses := func(g Gomega) []string {
		all := gh.all()
		out := make([]string, 0, len(all))
		for _, r := range all {
			var body map[string]string
			g.Expect(json.Unmarshal(r.Body, &body)).To(Succeed())
			g.Expect(r.Headers.Get("Authorization")).To(Equal("Bearer ghp_token"))
			out = append(out, r.Path+" "+body["state"]+" "+body["context"])
		}
		return out
	}
	g.Eventually(statuses, timeout, 100*time.Millisecond).Should(ConsistOf(
		"/repos/example/app/statuses/"+commitA+" pending fleet/app",
		"/repos/example/app/statuses/"+commitA+" success fleet/app",
		"/repos/example/other/statuses/"+commitA+" pending fleet/other",
	))

	// Commit B fails on edge-1.
	failing := fleet.BundleSummary{DesiredReady: 2, Ready: 1, ErrApplied: 1, NonReadyResources: []fleet.NonReadyResource{
		{Name: "fleet-default/edge-1", State: fleet.ErrApplied, Message: `chart "web" version "9.9.9" not found`}}}
	setBundle(ctx, g, bundle, commitB, failing)
	setCommit(ctx, g, repo, commitB)
	g.Eventually(func(g Gomega) {
		g.Expect(events(hook.messages(g, key))).To(HaveSuffix(",Started@" + commitB[:12] + ",Failed@" + commitB[:12]))
	}, timeout, 100*time.Millisecond).Should(Succeed())
	ms := hook.messages(g, key)
	failed := ms[len(ms)-1]
	g.Expect(failed.Errors).To(Equal([]notify.Failure{{Bundle: "app-web", Cluster: "fleet-default/edge-1", State: "ErrApplied",
		Message: `chart "web" version "9.9.9" not found`}}))
	g.Expect(failed.Text).To(ContainSubstring(`fleet-default/edge-1: chart "web" version "9.9.9" not found`))
	g.Expect(failed.Deployments.ErrApplied).To(Equal(1))
	g.Eventually(statuses, timeout, 100*time.Millisecond).Should(ContainElement("/repos/example/app/statuses/" + commitB + " failure fleet/app"))
	g.Consistently(func(g Gomega) { g.Expect(hook.all()).To(HaveLen(4)) }, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	// What was sent is in the status, and the destination is healthy.
	n := &notification.Notification{}
	g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "hook"}, n)).To(Succeed())
	g.Expect(n.Status.Rollouts).To(HaveLen(1))
	g.Expect(n.Status.Rollouts[0].Revision).To(Equal(commitB))
	g.Expect(n.Status.Rollouts[0].Sent).To(Equal([]string{"Started", "Failed"}))
	g.Expect(meta.IsStatusConditionFalse(n.Status.Conditions, notification.ConditionDestinationFailing)).To(BeTrue())
	g.Expect(meta.IsStatusConditionTrue(n.Status.Conditions, notification.ConditionReady)).To(BeTrue())
}

// A destination that does not answer shows in DestinationFailing, with
// nothing of the URL's secret path in the message.
func TestFailingDestinationShowsInACondition(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "failing")
	g.Expect(err).NotTo(HaveOccurred())
	dead := newReceiver(t)
	addr := dead.URL + "/services/T000/B000/XXXXSECRET"
	dead.Close()
	g.Expect(env.Create(ctx, &notification.Notification{ObjectMeta: metav1.ObjectMeta{Name: "slack", Namespace: ns.Name},
		Spec: notification.NotificationSpec{Destination: notification.Destination{Type: notification.DestinationSlack, Address: addr}}})).To(Succeed())
	repo := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns.Name}, Spec: fleet.GitRepoSpec{Repo: "https://example.com/a/b"}}
	g.Expect(env.Create(ctx, repo)).To(Succeed())
	bundle := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app-x", Namespace: ns.Name, Labels: map[string]string{fleet.RepoLabel: "app"}}}
	g.Expect(env.Create(ctx, bundle)).To(Succeed())
	startManager(t)
	setBundle(ctx, g, bundle, commitA, waitingSummary())
	setCommit(ctx, g, repo, commitA)
	g.Eventually(func(g Gomega) {
		n := &notification.Notification{}
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "slack"}, n)).To(Succeed())
		c := meta.FindStatusCondition(n.Status.Conditions, notification.ConditionDestinationFailing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(notification.ReasonSendFailed))
		g.Expect(c.Message).NotTo(ContainSubstring("XXXXSECRET"))
	}, timeout, 200*time.Millisecond).Should(Succeed())
}

// A Secret created or fixed takes effect within seconds, not at the next
// retry (5 minutes): a Notification whose Secret is missing sends once it
// is created, and one whose destination rejected the message (a wrong
// signing key) sends once the key is fixed.
func TestSecretChangesTakeEffectAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "secrets")
	g.Expect(err).NotTo(HaveOccurred())
	good := []byte("the-right-key")
	var mu sync.Mutex
	var accepted, refused int
	rv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		mu.Lock()
		defer mu.Unlock()
		if req.Header.Get(notify.SignatureHeader) != notify.Sign(good, body) {
			refused++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		accepted++
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rv.Close)
	counts := func() []int {
		mu.Lock()
		defer mu.Unlock()
		return []int{accepted, refused}
	}

	g.Expect(env.Create(ctx, &notification.Notification{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns.Name},
		Spec: notification.NotificationSpec{Destination: notification.Destination{Type: notification.DestinationWebhook,
			SecretRef: &notification.LocalObjectReference{Name: "late"}}}})).To(Succeed())
	repo := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns.Name}, Spec: fleet.GitRepoSpec{Repo: "https://example.com/a/b"}}
	g.Expect(env.Create(ctx, repo)).To(Succeed())
	bundle := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app-x", Namespace: ns.Name, Labels: map[string]string{fleet.RepoLabel: "app"}}}
	g.Expect(env.Create(ctx, bundle)).To(Succeed())
	startManager(t)
	setBundle(ctx, g, bundle, commitA, waitingSummary())
	setCommit(ctx, g, repo, commitA)
	condition := func(g Gomega, typ string) *metav1.Condition {
		n := &notification.Notification{}
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "hook"}, n)).To(Succeed())
		c := meta.FindStatusCondition(n.Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil())
		return c
	}
	g.Eventually(func(g Gomega) {
		g.Expect(condition(g, notification.ConditionReady).Reason).To(Equal(notification.ReasonSecretNotFound))
	}, timeout, 100*time.Millisecond).Should(Succeed())

	// The Secret appears, with the wrong key: rejected.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: ns.Name},
		Data: map[string][]byte{notification.SecretKeyAddress: []byte(rv.URL), notification.SecretKeyHMAC: []byte("the-wrong-key")}}
	g.Expect(env.Create(ctx, secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(condition(g, notification.ConditionDestinationFailing).Reason).To(Equal(notification.ReasonRejected))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(counts()).To(Equal([]int{0, 1}))

	// Fixed: delivered within seconds, once.
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	secret.Data[notification.SecretKeyHMAC] = good
	g.Expect(env.Update(ctx, secret)).To(Succeed())
	g.Eventually(counts, 10*time.Second, 100*time.Millisecond).Should(Equal([]int{1, 1}))
	g.Eventually(func(g Gomega) {
		g.Expect(condition(g, notification.ConditionDestinationFailing).Reason).To(Equal(notification.ReasonSent))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(counts, 2*time.Second, 200*time.Millisecond).Should(Equal([]int{1, 1}))
}

// A manager that dies between delivering a rollout's first message and
// recording it finds the rollout's record when it comes back: it tells the
// message again, with the same ID, and then the end of the rollout, which
// a lost record would have taken as told already.
func TestACrashAfterSendingLosesNoTransition(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "crash")
	g.Expect(err).NotTo(HaveOccurred())
	key := []byte("crash-hmac-key")
	var stop func()
	var mu sync.Mutex
	var got [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		mu.Lock()
		got = append(got, body)
		first := len(got) == 1
		mu.Unlock()
		if first {
			// Delivered; the manager dies before it hears so.
			stop()
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	bodies := func() []notify.Message {
		mu.Lock()
		defer mu.Unlock()
		out := make([]notify.Message, 0, len(got))
		for _, b := range got {
			var m notify.Message
			g.Expect(json.Unmarshal(b, &m)).To(Succeed())
			out = append(out, m)
		}
		return out
	}
	g.Expect(env.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns.Name},
		Data: map[string][]byte{notification.SecretKeyHMAC: key, notification.SecretKeyAddress: []byte(srv.URL + "/hook")}})).To(Succeed())
	g.Expect(env.Create(ctx, &notification.Notification{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns.Name}, Spec: notification.NotificationSpec{
		Destination: notification.Destination{Type: notification.DestinationWebhook, SecretRef: &notification.LocalObjectReference{Name: "hook"}}}})).To(Succeed())
	repo := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns.Name}, Spec: fleet.GitRepoSpec{Repo: "https://github.com/example/app.git"}}
	g.Expect(env.Create(ctx, repo)).To(Succeed())
	bundle := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app-web", Namespace: ns.Name, Labels: map[string]string{fleet.RepoLabel: "app"}}}
	g.Expect(env.Create(ctx, bundle)).To(Succeed())

	stop = startManager(t)
	setBundle(ctx, g, bundle, commitA, waitingSummary())
	setCommit(ctx, g, repo, commitA)
	g.Eventually(func() int { return len(bodies()) }, timeout, 100*time.Millisecond).Should(Equal(1))
	stop()

	// The rollout ends while no manager runs.
	setBundle(ctx, g, bundle, commitA, readySummary())
	stop = startManager(t)
	g.Eventually(func(g Gomega) {
		ms := bodies()
		g.Expect(ms).NotTo(BeEmpty())
		g.Expect(ms[len(ms)-1].Event).To(Equal(string(notification.EventSucceeded)))
	}, timeout, 100*time.Millisecond).Should(Succeed())
	ms := bodies()
	g.Expect(events(ms)).To(Equal("Started@" + commitA[:12] + ",Started@" + commitA[:12] + ",Succeeded@" + commitA[:12]))
	g.Expect(ms[1].ID).To(Equal(ms[0].ID), "the message told again is the same message")
}
