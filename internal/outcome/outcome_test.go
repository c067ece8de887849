package outcome_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/outcome"
)

func TestResult(t *testing.T) {
	stalled := outcome.Stallf(fleet.ReasonSecretNotFound, "secret %q not found", "creds")
	cases := []struct {
		name     string
		err      error
		poll     time.Duration
		want     ctrl.Result
		wantErr  bool
		terminal bool
	}{
		{name: "success", want: ctrl.Result{}},
		{name: "success, polled", poll: time.Minute, want: ctrl.Result{RequeueAfter: time.Minute}},
		{name: "stalled stops", err: stalled, wantErr: true, terminal: true},
		{name: "stalled keeps polling", err: stalled, poll: time.Minute, want: ctrl.Result{RequeueAfter: time.Minute}},
		{name: "wrapped stall", err: fmt.Errorf("phase: %w", stalled), wantErr: true, terminal: true},
		{name: "waiting with a time", err: outcome.Waitf(fleet.ReasonPendingBound, 2*time.Second, "full"), want: ctrl.Result{RequeueAfter: 2 * time.Second}},
		{name: "waiting for backoff", err: outcome.Waitf(fleet.ReasonClusterUnreachable, 0, "down"), wantErr: true},
		{name: "plain error backs off, even polled", err: errors.New("conflict"), poll: time.Minute, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := outcome.Result(tc.err, tc.poll)
			g.Expect(got).To(Equal(tc.want))
			if !tc.wantErr {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(Equal(tc.terminal))
		})
	}
}

func TestReasonOf(t *testing.T) {
	g := NewWithT(t)
	g.Expect(outcome.ReasonOf(nil, "Fallback")).To(Equal("Fallback"))
	g.Expect(outcome.ReasonOf(errors.New("x"), "Fallback")).To(Equal("Fallback"))
	g.Expect(outcome.ReasonOf(fmt.Errorf("a: %w", outcome.Stall(fleet.ReasonTLS, errors.New("x"))), "F")).To(Equal(fleet.ReasonTLS))
	g.Expect(outcome.ReasonOf(outcome.Wait(fleet.ReasonPendingBound, 0, errors.New("x")), "F")).To(Equal(fleet.ReasonPendingBound))
	g.Expect(outcome.Stall("R", nil)).To(Succeed())
	g.Expect(outcome.Wait("R", 0, nil)).To(Succeed())
}

type recorded struct{ kind, reason, action, note string }

type recorder struct{ events []recorded }

func (r *recorder) Eventf(_ runtime.Object, _ runtime.Object, kind, reason, action, note string, args ...interface{}) {
	r.events = append(r.events, recorded{kind, reason, action, fmt.Sprintf(note, args...)})
}

func TestComputeSetsTheConditionAndRecordsChanges(t *testing.T) {
	g := NewWithT(t)
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Generation: 3}}
	rec := &recorder{}
	in := outcome.Input{Object: cluster, Condition: fleet.ConditionImported, SuccessReason: fleet.ReasonApplied,
		FallbackReason: fleet.ReasonInstallFailed, Recorder: rec, Action: "Import"}

	// The first success is no news: no event.
	_, err := outcome.Compute(context.Background(), in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conditions.IsTrue(cluster, fleet.ConditionImported)).To(BeTrue())
	g.Expect(conditions.Get(cluster, fleet.ConditionImported).ObservedGeneration).To(Equal(int64(3)))
	g.Expect(rec.events).To(BeEmpty())

	// A stall: False with its reason, one Warning, and the same stall again
	// records nothing more.
	in.Err = outcome.Stallf(fleet.ReasonKubeconfigInvalid, "kubeconfig rejected")
	for range 2 {
		_, err = outcome.Compute(context.Background(), in)
		g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(BeTrue())
	}
	c := conditions.Get(cluster, fleet.ConditionImported)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(fleet.ReasonKubeconfigInvalid))
	g.Expect(c.Message).To(Equal("kubeconfig rejected"))
	g.Expect(rec.events).To(Equal([]recorded{{"Warning", fleet.ReasonKubeconfigInvalid, "Import", "kubeconfig rejected"}}))

	// A plain error falls back to the fallback reason and is returned for
	// backoff; recovery records a Normal event.
	in.Err = errors.New("connection refused")
	_, err = outcome.Compute(context.Background(), in)
	g.Expect(err).To(MatchError("connection refused"))
	g.Expect(conditions.Get(cluster, fleet.ConditionImported).Reason).To(Equal(fleet.ReasonInstallFailed))
	in.Err = nil
	_, err = outcome.Compute(context.Background(), in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.events).To(HaveLen(3))
	g.Expect(rec.events[2].kind).To(Equal("Normal"))
}

func TestConditionEvent(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason, message string) *metav1.Condition {
		return &metav1.Condition{Type: fleet.ConditionAccepted, Status: status, Reason: reason, Message: message}
	}
	cases := []struct {
		name     string
		was, now *metav1.Condition
		want     string
	}{
		{name: "first success", now: cond(metav1.ConditionTrue, fleet.ReasonReady, ""), want: ""},
		{name: "first failure", now: cond(metav1.ConditionFalse, fleet.ReasonFetchFailed, "x"), want: "Warning"},
		{name: "turns False", was: cond(metav1.ConditionTrue, fleet.ReasonReady, ""), now: cond(metav1.ConditionFalse, fleet.ReasonFetchFailed, "x"), want: "Warning"},
		{name: "another failure", was: cond(metav1.ConditionFalse, fleet.ReasonAuthFailed, "x"), now: cond(metav1.ConditionFalse, fleet.ReasonFetchFailed, "x"), want: "Warning"},
		{name: "same failure, new message", was: cond(metav1.ConditionFalse, fleet.ReasonFetchFailed, "x"), now: cond(metav1.ConditionFalse, fleet.ReasonFetchFailed, "y"), want: ""},
		{name: "recovers", was: cond(metav1.ConditionFalse, fleet.ReasonFetchFailed, "x"), now: cond(metav1.ConditionTrue, fleet.ReasonReady, ""), want: "Normal"},
		{name: "stays True", was: cond(metav1.ConditionTrue, fleet.ReasonReady, "a"), now: cond(metav1.ConditionTrue, fleet.ReasonReady, "b"), want: ""},
		{name: "Unknown", was: cond(metav1.ConditionFalse, fleet.ReasonFetchFailed, "x"), now: cond(metav1.ConditionUnknown, fleet.ReasonNotReady, ""), want: ""},
		{name: "gone", was: cond(metav1.ConditionFalse, fleet.ReasonFetchFailed, "x"), want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(outcome.ConditionEvent(tc.was, tc.now)).To(Equal(tc.want))
		})
	}
}

func TestComputeRecordsTheEventsOfWatchedConditions(t *testing.T) {
	g := NewWithT(t)
	repo := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}}
	conditions.MarkTrue(repo, fleet.ConditionAccepted, fleet.ReasonBundlesRead, "")
	before := append([]metav1.Condition(nil), repo.Status.Conditions...)
	// The caller's status functions set the conditions, then Compute.
	conditions.MarkFalse(repo, fleet.ConditionAccepted, fleet.ReasonInvalidBundle, "fleet.yaml: line 3")
	conditions.MarkFalse(repo, fleet.ConditionGitPolling, fleet.ReasonFetchFailed, "unreachable")
	rec := &recorder{}
	res, err := outcome.Compute(context.Background(), outcome.Input{Object: repo, Before: before, Recorder: rec, Poll: time.Minute,
		Err:    outcome.Stallf(fleet.ReasonInvalidBundle, "fleet.yaml: line 3"),
		Events: []outcome.Watch{{Condition: fleet.ConditionGitPolling, Action: "Poll"}, {Condition: fleet.ConditionAccepted, Action: "Sync"}}})
	g.Expect(err).NotTo(HaveOccurred(), "a polled stall keeps polling")
	g.Expect(res.RequeueAfter).To(Equal(time.Minute))
	g.Expect(rec.events).To(Equal([]recorded{
		{"Warning", fleet.ReasonFetchFailed, "Poll", "unreachable"},
		{"Warning", fleet.ReasonInvalidBundle, "Sync", "fleet.yaml: line 3"},
	}))

	// After, on success, comes back sooner than the poll.
	res, err = outcome.Compute(context.Background(), outcome.Input{Object: repo, Poll: time.Minute, After: time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(time.Second))
}
