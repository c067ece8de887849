package gitrepo

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/sourcepoll"
)

// branchNotFound is a permanent gitfetch error, as LatestCommit returns it.
func branchNotFound() error {
	_, _, err := gitfetch.Resolve(nil, "https://example.com/r", "dev", "")
	return err
}

func TestGitPollingCondition(t *testing.T) {
	transient := errors.New("fetching https://example.com/r: connection refused")
	for name, tc := range map[string]struct {
		gitErr          error
		status          metav1.ConditionStatus
		reason, message string
	}{
		"ok":                   {status: metav1.ConditionTrue, reason: fleet.ReasonPolled, message: "latest commit abc"},
		"transient poll error": {gitErr: transient, status: metav1.ConditionFalse, reason: fleet.ReasonFetchFailed, message: transient.Error()},
		"missing branch":       {gitErr: branchNotFound(), status: metav1.ConditionFalse, reason: fleet.ReasonBranchNotFound, message: "branch dev not found in https://example.com/r"},
		"missing secret": {gitErr: outcome.Stallf(fleet.ReasonSecretNotFound, "clientSecretName: Secret x not found"),
			status: metav1.ConditionFalse, reason: fleet.ReasonSecretNotFound, message: "clientSecretName: Secret x not found"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := gitPollingCondition(tc.gitErr, "abc")
			g.Expect(c.Type).To(Equal(fleet.ConditionGitPolling))
			g.Expect(c.Status).To(Equal(tc.status))
			g.Expect(c.Reason).To(Equal(tc.reason))
			g.Expect(c.Message).To(Equal(tc.message))
		})
	}
}

func TestAcceptedCondition(t *testing.T) {
	badYAML := fmt.Errorf("reading the bundles of commit abc: %w", outcome.Stallf(fleet.ReasonInvalidBundle, "app/fleet.yaml: line 3: unknown field \"nope\""))
	for name, tc := range map[string]struct {
		gitErr, syncErr error
		status          metav1.ConditionStatus
		reason, message string
	}{
		"ok":                        {status: metav1.ConditionTrue, reason: fleet.ReasonBundlesRead, message: "bundles of commit 0123456789ab are applied"},
		"transient git keeps true":  {gitErr: errors.New("timeout"), status: metav1.ConditionTrue, reason: fleet.ReasonBundlesRead},
		"transient git keeps false": {gitErr: errors.New("timeout"), syncErr: badYAML, status: metav1.ConditionFalse, reason: fleet.ReasonInvalidBundle},
		"missing branch":            {gitErr: branchNotFound(), status: metav1.ConditionFalse, reason: fleet.ReasonBranchNotFound, message: "branch dev not found in https://example.com/r"},
		"git stall wins":            {gitErr: branchNotFound(), syncErr: badYAML, status: metav1.ConditionFalse, reason: fleet.ReasonBranchNotFound},
		"malformed fleet.yaml":      {syncErr: badYAML, status: metav1.ConditionFalse, reason: fleet.ReasonInvalidBundle, message: badYAML.Error()},
		"missing secret":            {gitErr: outcome.Stallf(fleet.ReasonSecretNotFound, "clientSecretName: Secret x not found"), status: metav1.ConditionFalse, reason: fleet.ReasonSecretNotFound},
		"missing helm secret":       {syncErr: outcome.Stallf(fleet.ReasonSecretNotFound, "helmSecretName: Secret x not found"), status: metav1.ConditionFalse, reason: fleet.ReasonSecretNotFound},
		"transient write is reported": {syncErr: errors.New("writing bundle a: conflict"), status: metav1.ConditionFalse, reason: fleet.ReasonSyncFailed,
			message: "writing bundle a: conflict"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := acceptedCondition(tc.gitErr, tc.syncErr, "0123456789abcdef0123456789abcdef01234567")
			g.Expect(c.Type).To(Equal(fleet.ConditionAccepted))
			g.Expect(c.Status).To(Equal(tc.status))
			g.Expect(c.Reason).To(Equal(tc.reason))
			if tc.message != "" {
				g.Expect(c.Message).To(Equal(tc.message))
			}
		})
	}
}

func TestConditionEvents(t *testing.T) {
	cond := func(t string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}
	}
	polledOK := cond(fleet.ConditionGitPolling, metav1.ConditionTrue, fleet.ReasonPolled, "latest commit a")
	polledOK2 := cond(fleet.ConditionGitPolling, metav1.ConditionTrue, fleet.ReasonPolled, "latest commit b")
	noBranch := cond(fleet.ConditionGitPolling, metav1.ConditionFalse, fleet.ReasonBranchNotFound, "branch x not found")
	noBranchAgain := cond(fleet.ConditionGitPolling, metav1.ConditionFalse, fleet.ReasonBranchNotFound, "branch y not found")
	unreachable := cond(fleet.ConditionGitPolling, metav1.ConditionFalse, fleet.ReasonFetchFailed, "connection refused")
	accepted := cond(fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonBundlesRead, "bundles of commit a are applied")
	badYAML := cond(fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonInvalidBundle, "app/fleet.yaml: line 2")
	for name, tc := range map[string]struct {
		before, after []metav1.Condition
		want          []recordedEvent
	}{
		"first success is no news": {after: []metav1.Condition{polledOK, accepted}},
		"a new commit is no news":  {before: []metav1.Condition{polledOK, accepted}, after: []metav1.Condition{polledOK2, accepted}},
		"first poll fails": {after: []metav1.Condition{noBranch},
			want: []recordedEvent{{kind: "Warning", reason: fleet.ReasonBranchNotFound, action: "Poll", note: "branch x not found"}}},
		"bundles turn bad": {before: []metav1.Condition{polledOK, accepted}, after: []metav1.Condition{polledOK, badYAML},
			want: []recordedEvent{{kind: "Warning", reason: fleet.ReasonInvalidBundle, action: "Sync", note: "app/fleet.yaml: line 2"}}},
		"the same failure again is no news": {before: []metav1.Condition{noBranch, badYAML}, after: []metav1.Condition{noBranchAgain, badYAML}},
		"a failure with a new reason": {before: []metav1.Condition{noBranch}, after: []metav1.Condition{unreachable},
			want: []recordedEvent{{kind: "Warning", reason: fleet.ReasonFetchFailed, action: "Poll", note: "connection refused"}}},
		"recovery": {before: []metav1.Condition{noBranch, badYAML}, after: []metav1.Condition{polledOK, accepted},
			want: []recordedEvent{
				{kind: "Normal", reason: fleet.ReasonPolled, action: "Poll", note: "latest commit a"},
				{kind: "Normal", reason: fleet.ReasonBundlesRead, action: "Sync", note: "bundles of commit a are applied"},
			}},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			outcome.RecordEvents(rec, &fleet.GitRepo{}, nil, tc.before, tc.after, statusEvents...)
			NewWithT(t).Expect(rec.events).To(Equal(tc.want))
		})
	}
}

func TestSetStatusKeepsConditionsUntilPolled(t *testing.T) {
	g := NewWithT(t)
	repo := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	setStatus(repo, &repoState{}, nil)
	g.Expect(meta.FindStatusCondition(repo.Status.Conditions, fleet.ConditionAccepted)).To(BeNil())
	g.Expect(meta.IsStatusConditionTrue(repo.Status.Conditions, fleet.ConditionReady)).To(BeTrue())

	setStatus(repo, &repoState{poll: sourcepoll.Poll{Done: true}, gitErr: branchNotFound()}, nil)
	g.Expect(meta.IsStatusConditionFalse(repo.Status.Conditions, fleet.ConditionAccepted)).To(BeTrue())
	g.Expect(meta.IsStatusConditionFalse(repo.Status.Conditions, fleet.ConditionGitPolling)).To(BeTrue())
	ready := meta.FindStatusCondition(repo.Status.Conditions, fleet.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Message).To(Equal("branch dev not found in https://example.com/r"))
	g.Expect(ready.ObservedGeneration).To(BeEquivalentTo(3))
	g.Expect(repo.Status.Display.Error).To(BeTrue())
}

func TestPollDueAndSyncNeeded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	repo := func(mut func(*fleet.GitRepo)) *fleet.GitRepo {
		r := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		if mut != nil {
			mut(r)
		}
		return r
	}
	polled := func(mut func(*repoState)) *repoState {
		st := &repoState{poll: sourcepoll.Poll{Done: true, Generation: 2, Next: now.Add(time.Second)}, webhookCommit: "w1",
			synced: true, syncedCommit: "c1", syncedGeneration: 2}
		if mut != nil {
			mut(st)
		}
		return st
	}
	for name, tc := range map[string]struct {
		st   *repoState
		repo *fleet.GitRepo
		due  bool
	}{
		"never polled":         {&repoState{}, repo(nil), true},
		"not yet":              {polled(nil), repo(nil), false},
		"interval passed":      {polled(func(s *repoState) { s.poll.Next = now }), repo(nil), true},
		"spec changed":         {polled(nil), repo(func(r *fleet.GitRepo) { r.Generation = 3 }), true},
		"transient error":      {polled(func(s *repoState) { s.poll.Retry = true }), repo(nil), true},
		"webhook":              {polled(nil), repo(func(r *fleet.GitRepo) { r.Status.WebhookCommit = "w2" }), true},
		"webhook already seen": {polled(nil), repo(func(r *fleet.GitRepo) { r.Status.WebhookCommit = "w1" }), false},
		"polling disabled": {polled(func(s *repoState) { s.poll.Next = now }),
			repo(func(r *fleet.GitRepo) { r.Spec.DisablePolling = true }), false},
		"polling disabled, webhook": {polled(nil),
			repo(func(r *fleet.GitRepo) { r.Spec.DisablePolling = true; r.Status.WebhookCommit = "w2" }), true},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(pollDue(now, tc.st, tc.repo)).To(Equal(tc.due))
		})
	}

	g := NewWithT(t)
	g.Expect(syncNeeded(&repoState{}, repo(nil), "c1")).To(BeTrue(), "first sync since start")
	synced := func(r *fleet.GitRepo) {
		r.Status.Commit, r.Status.ObservedGeneration = "c1", 2
		r.Status.Conditions = []metav1.Condition{{Type: fleet.ConditionAccepted, Status: metav1.ConditionTrue}}
	}
	g.Expect(syncNeeded(&repoState{}, repo(synced), "c1")).To(BeFalse(), "after a restart, the status says c1 is applied")
	g.Expect(syncNeeded(&repoState{}, repo(synced), "c2")).To(BeTrue(), "after a restart, a new commit")
	g.Expect(syncNeeded(&repoState{}, repo(func(r *fleet.GitRepo) { synced(r); r.Generation = 3 }), "c1")).To(BeTrue(), "after a restart, a new spec")
	g.Expect(syncNeeded(&repoState{}, repo(func(r *fleet.GitRepo) {
		synced(r)
		r.Status.Conditions[0].Status = metav1.ConditionFalse
	}), "c1")).To(BeTrue(), "after a restart, the last sync had failed")
	g.Expect(syncNeeded(polled(nil), repo(nil), "c1")).To(BeFalse(), "same commit, same spec")
	g.Expect(syncNeeded(polled(nil), repo(nil), "c2")).To(BeTrue(), "new commit")
	g.Expect(syncNeeded(polled(nil), repo(func(r *fleet.GitRepo) { r.Generation = 3 }), "c1")).To(BeTrue(), "spec or forceSyncGeneration changed")
}

func TestPollInterval(t *testing.T) {
	g := NewWithT(t)
	g.Expect(pollInterval(&fleet.GitRepo{})).To(Equal(fleet.DefaultPollingInterval))
	g.Expect(pollInterval(&fleet.GitRepo{Spec: fleet.GitRepoSpec{PollingInterval: &metav1.Duration{Duration: time.Minute}}})).To(Equal(time.Minute))
}

func TestFailedPhasesAreRemembered(t *testing.T) {
	g := NewWithT(t)
	s := &scope{repo: &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Generation: 4}}}

	st := &repoState{latest: "c2"}
	g.Expect(st.failGit(errors.New("connection refused"))).To(HaveOccurred())
	g.Expect(st.poll.Retry).To(BeTrue(), "a transient git error polls again with backoff")
	st = &repoState{latest: "c2"}
	g.Expect(st.failGit(branchNotFound())).To(HaveOccurred())
	g.Expect(st.poll.Retry).To(BeFalse(), "a stalled poll waits for the polling interval")

	st = &repoState{latest: "c2"}
	_ = st.failSync(s, errors.New("writing bundle a: conflict"))
	g.Expect(st.poll.Retry).To(BeTrue())
	g.Expect(st.synced).To(BeFalse(), "a transient sync error reads the commit again")

	st = &repoState{latest: "c2"}
	_ = st.failSync(s, outcome.Stallf(fleet.ReasonInvalidBundle, "bad fleet.yaml"))
	g.Expect(st.poll.Retry).To(BeFalse())
	g.Expect(st.synced).To(BeTrue(), "a stalled commit is not read again until it or the spec changes")
	g.Expect(syncNeeded(st, s.repo, "c2")).To(BeFalse())
	g.Expect(syncNeeded(st, s.repo, "c3")).To(BeTrue())
}

func TestWarningCondition(t *testing.T) {
	many := make([]string, 12)
	for i := range many {
		many[i] = fmt.Sprintf("app%d/fleet.yaml: line 1: unknown field \"x\" is ignored (a typo?)", i)
	}
	long := "app/fleet.yaml: line 2: " + strings.Repeat("é", 400)
	for name, tc := range map[string]struct {
		warnings []string
		want     bool
		message  string
	}{
		"none: no condition": {},
		"one": {
			warnings: []string{`app/fleet.yaml: line 3: unknown field "helm.chartt" is ignored (a typo?)`},
			want:     true,
			message:  `1 fleet.yaml key ignored: app/fleet.yaml: line 3: unknown field "helm.chartt" is ignored (a typo?)`,
		},
		"two": {
			warnings: []string{"a/fleet.yaml: line 1: x", "b/fleet.yaml: line 2: y"},
			want:     true,
			message:  "2 fleet.yaml keys ignored: a/fleet.yaml: line 1: x; b/fleet.yaml: line 2: y",
		},
		"more than ten are counted, not listed": {
			warnings: many,
			want:     true,
			message:  "12 fleet.yaml keys ignored: " + strings.Join(many[:10], "; ") + "; and 2 more",
		},
		"a long one is cut, on a character boundary": {
			warnings: []string{long},
			want:     true,
			message:  "1 fleet.yaml key ignored: " + strings.ToValidUTF8(long[:300], "") + "...",
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c, ok := warningCondition(tc.warnings)
			g.Expect(ok).To(Equal(tc.want))
			if !tc.want {
				return
			}
			g.Expect(c.Type).To(Equal(fleet.ConditionWarning))
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(fleet.ReasonIgnoredFields))
			g.Expect(c.Message).To(Equal(tc.message))
			g.Expect(utf8.ValidString(c.Message)).To(BeTrue())
		})
	}
}

// TestSetStatusWarning: the Warning condition follows the last read of the
// bundles, is removed when a read has none, is kept as it is until a read
// since the manager started, and never makes the GitRepo not Ready.
func TestSetStatusWarning(t *testing.T) {
	g := NewWithT(t)
	repo := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	setStatus(repo, &repoState{poll: sourcepoll.Poll{Done: true}, warningsRead: true, warnings: []string{"app/fleet.yaml: line 1: x"}}, nil)
	w := meta.FindStatusCondition(repo.Status.Conditions, fleet.ConditionWarning)
	g.Expect(w).NotTo(BeNil())
	g.Expect(w.Message).To(Equal("1 fleet.yaml key ignored: app/fleet.yaml: line 1: x"))
	g.Expect(w.ObservedGeneration).To(BeEquivalentTo(2))
	g.Expect(meta.IsStatusConditionTrue(repo.Status.Conditions, fleet.ConditionReady)).To(BeTrue())

	// A restarted manager has not read the bundles yet: the condition stays.
	setStatus(repo, &repoState{poll: sourcepoll.Poll{Done: true}}, nil)
	g.Expect(meta.FindStatusCondition(repo.Status.Conditions, fleet.ConditionWarning)).NotTo(BeNil())

	setStatus(repo, &repoState{poll: sourcepoll.Poll{Done: true}, warningsRead: true}, nil)
	g.Expect(meta.FindStatusCondition(repo.Status.Conditions, fleet.ConditionWarning)).To(BeNil())
}

// recordedEvent is an event a recorder got.
type recordedEvent struct{ kind, reason, action, note string }

// recorder keeps the events recorded.
type recorder struct{ events []recordedEvent }

func (r *recorder) Eventf(_, _ runtime.Object, kind, reason, action, note string, args ...interface{}) {
	r.events = append(r.events, recordedEvent{kind, reason, action, fmt.Sprintf(note, args...)})
}

// TestRecordPoll: status.lastPollingTriggered follows each poll that writes
// the status anyway, and a poll that changes nothing else only once it is a
// minute old; a reconcile that did not poll leaves it.
func TestRecordPoll(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	status := func(commit string, polled time.Time) *fleet.GitRepoStatus {
		return &fleet.GitRepoStatus{Commit: commit, LastPollingTriggered: metav1.NewTime(polled),
			Conditions: []metav1.Condition{{Type: fleet.ConditionReady, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}}
	}
	for _, tc := range []struct {
		name         string
		before       *fleet.GitRepoStatus
		after        *fleet.GitRepoStatus
		polled, want time.Time
	}{
		{"the first poll", &fleet.GitRepoStatus{}, &fleet.GitRepoStatus{}, at, at},
		{"no poll", status("a", at), status("a", at), time.Time{}, at},
		{"nothing changed, recorded 59 s ago", status("a", at), status("a", at), at.Add(59 * time.Second), at},
		{"nothing changed, recorded a minute ago", status("a", at), status("a", at), at.Add(time.Minute), at.Add(time.Minute)},
		{"a new commit", status("a", at), status("b", at), at.Add(15 * time.Second), at.Add(15 * time.Second)},
		{"a condition changed", status("a", at), func() *fleet.GitRepoStatus {
			s := status("a", at)
			s.Conditions[0].Status = metav1.ConditionFalse
			return s
		}(), at.Add(15 * time.Second), at.Add(15 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recordPoll(tc.before, tc.after, tc.polled)
			NewWithT(t).Expect(tc.after.LastPollingTriggered.Time).To(BeTemporally("==", tc.want))
		})
	}
}
