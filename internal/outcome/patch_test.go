package outcome_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/test/controlplane"
)

// patches counts the PATCH requests a client sends to a real API server.
type patches struct {
	n    atomic.Int32
	next http.RoundTripper
}

func (p *patches) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch {
		p.n.Add(1)
	}
	return p.next.RoundTrip(req)
}

// TestPatchStatus runs the one status patcher against a real API server:
// what it sends, when it sends nothing, and how it ends when the object is
// gone or changed meanwhile.
func TestPatchStatus(t *testing.T) {
	cp, err := controlplane.Start(controlplane.Options{Name: "outcome"})
	if err != nil {
		t.Fatalf("starting the control plane (make controlplane builds its binaries): %v", err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	NewWithT(t).Expect(fleet.AddToScheme(scheme)).To(Succeed())
	counter := &patches{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "patch-"}}
	NewWithT(t).Expect(c.Create(ctx, ns)).To(Succeed())

	// newGroup creates a ClusterGroup with a Ready condition and returns it
	// as read back: the reconcile's "before".
	newGroup := func(g Gomega, name string) *fleet.ClusterGroup {
		group := &fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name}}
		g.Expect(c.Create(ctx, group)).To(Succeed())
		conditions.MarkFalse(group, fleet.ConditionReady, fleet.ReasonNotReady, "counting")
		group.Status.ClusterCount = 1
		g.Expect(c.Status().Update(ctx, group)).To(Succeed())
		return group
	}

	cases := []struct {
		name string
		// change changes the object read (and may act on the server)
		// before the patch.
		change func(g Gomega, group *fleet.ClusterGroup)
		opts   []outcome.PatchOption
		// patches is how many PATCH requests the patcher sends.
		patches int32
		check   func(g Gomega, err error, live *fleet.ClusterGroup, found bool)
	}{{
		name:    "no change sends nothing",
		change:  func(Gomega, *fleet.ClusterGroup) {},
		patches: 0,
		check: func(g Gomega, err error, live *fleet.ClusterGroup, _ bool) {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(live.Status.ClusterCount).To(Equal(1))
		},
	}, {
		name: "a change of metadata alone sends nothing: only status is written",
		change: func(_ Gomega, group *fleet.ClusterGroup) {
			group.Labels = map[string]string{"in": "memory"}
		},
		patches: 0,
		check: func(g Gomega, err error, live *fleet.ClusterGroup, _ bool) {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(live.Labels).NotTo(HaveKey("in"))
		},
	}, {
		name: "a change is written in one patch of the status",
		change: func(_ Gomega, group *fleet.ClusterGroup) {
			group.Status.ClusterCount = 3
			conditions.MarkTrue(group, fleet.ConditionReady, fleet.ReasonReady, "")
			group.Labels = map[string]string{"in": "memory"}
		},
		patches: 1,
		check: func(g Gomega, err error, live *fleet.ClusterGroup, _ bool) {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(live.Status.ClusterCount).To(Equal(3))
			g.Expect(conditions.IsTrue(live, fleet.ConditionReady)).To(BeTrue())
			g.Expect(live.Labels).NotTo(HaveKey("in"), "metadata is not the status patch's")
		},
	}, {
		name: "what the status no longer has is removed on the server",
		change: func(_ Gomega, group *fleet.ClusterGroup) {
			group.Status.Conditions = nil
			group.Status.ClusterCount = 0
		},
		patches: 1,
		check: func(g Gomega, err error, live *fleet.ClusterGroup, _ bool) {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(live.Status.Conditions).To(BeEmpty())
			g.Expect(live.Status.ClusterCount).To(BeZero())
		},
	}, {
		name: "an object gone is no error",
		change: func(g Gomega, group *fleet.ClusterGroup) {
			g.Expect(c.Delete(ctx, group.DeepCopy())).To(Succeed())
			group.Status.ClusterCount = 5
		},
		patches: 1,
		check: func(g Gomega, err error, _ *fleet.ClusterGroup, found bool) {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(found).To(BeFalse())
		},
	}, {
		name: "a conflict under the optimistic lock is a short Wait, and nothing is overwritten",
		change: func(g Gomega, group *fleet.ClusterGroup) {
			// Another writer changes the status after the reconcile read it.
			other := group.DeepCopy()
			other.Status.ClusterCount = 7
			g.Expect(c.Status().Update(ctx, other)).To(Succeed())
			group.Status.ClusterCount = 2
		},
		opts:    []outcome.PatchOption{outcome.WithOptimisticLock(true)},
		patches: 1,
		check: func(g Gomega, err error, live *fleet.ClusterGroup, _ bool) {
			g.Expect(outcome.IsWaiting(err)).To(BeTrue(), "got %v", err)
			g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonStaleRead))
			g.Expect(err.Error()).To(ContainSubstring("ClusterGroup " + ns.Name + "/"))
			res, rerr := outcome.Result(err, 0)
			g.Expect(rerr).NotTo(HaveOccurred(), "a conflict is expected: no backoff, no error log")
			g.Expect(res.RequeueAfter).To(Equal(outcome.ConflictWait))
			g.Expect(live.Status.ClusterCount).To(Equal(7), "the other writer's status stays")
		},
	}, {
		name: "a write gives the object its new resourceVersion: a second write under the lock follows it",
		change: func(g Gomega, group *fleet.ClusterGroup) {
			before := group.DeepCopy()
			group.Status.ClusterCount = 4
			g.Expect(outcome.PatchStatus(ctx, c, before, group, outcome.WithOptimisticLock(true))).To(Succeed())
			g.Expect(group.ResourceVersion).NotTo(Equal(before.ResourceVersion))
			g.Expect(group.Status.ClusterCount).To(Equal(4), "the status written stays")
			// The reconcile goes on from what it wrote.
			*before = *group.DeepCopy()
			group.Status.ClusterCount = 6
			g.Expect(outcome.PatchStatus(ctx, c, before, group, outcome.WithOptimisticLock(true))).To(Succeed())
			group.Status.ClusterCount = 8
		},
		opts:    []outcome.PatchOption{outcome.WithOptimisticLock(true)},
		patches: 1,
		check: func(g Gomega, err error, live *fleet.ClusterGroup, _ bool) {
			g.Expect(outcome.IsWaiting(err)).To(BeTrue(), "the test's before is the first read: its resourceVersion is stale, got %v", err)
			g.Expect(live.Status.ClusterCount).To(Equal(6))
		},
	}, {
		name: "without the lock the last writer wins",
		change: func(g Gomega, group *fleet.ClusterGroup) {
			other := group.DeepCopy()
			other.Status.ClusterCount = 7
			g.Expect(c.Status().Update(ctx, other)).To(Succeed())
			group.Status.ClusterCount = 2
		},
		patches: 1,
		check: func(g Gomega, err error, live *fleet.ClusterGroup, _ bool) {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(live.Status.ClusterCount).To(Equal(2))
		},
	}}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			group := newGroup(g, "g"+string(rune('a'+i)))
			before := group.DeepCopy()
			tc.change(g, group)
			sent := counter.n.Load()
			err := outcome.PatchStatus(ctx, c, before, group, tc.opts...)
			g.Expect(counter.n.Load() - sent).To(Equal(tc.patches))
			live := &fleet.ClusterGroup{}
			gerr := c.Get(ctx, client.ObjectKeyFromObject(before), live)
			g.Expect(client.IgnoreNotFound(gerr)).To(Succeed())
			tc.check(g, err, live, gerr == nil)
		})
	}
}

// TestWritten: a failed status write wins over the reconcile's outcome, so
// that it is retried; a terminal error is not joined in, which would stop
// the retry.
func TestWritten(t *testing.T) {
	stall := outcome.Stallf(fleet.ReasonInvalidSelector, "bad selector")
	terminal := reconcile.TerminalError(stall)
	wait := outcome.Waitf(fleet.ReasonStaleRead, outcome.ConflictWait, "conflict")
	lost := errors.New("connection refused")
	cases := []struct {
		name     string
		res      ctrl.Result
		err      error
		writeErr error
		want     ctrl.Result
		wantErr  []error
		terminal bool
	}{
		{name: "written: the outcome stands", res: ctrl.Result{RequeueAfter: time.Minute}, want: ctrl.Result{RequeueAfter: time.Minute}},
		{name: "written after a stall: still terminal", err: terminal, wantErr: []error{stall}, terminal: true},
		{name: "a conflict comes back shortly", err: terminal, writeErr: wait, want: ctrl.Result{RequeueAfter: outcome.ConflictWait}},
		{name: "a lost write after a stall is retried", err: terminal, writeErr: lost, wantErr: []error{lost}},
		{name: "a lost write after a transient error carries both", err: errors.New("boom"), writeErr: lost, wantErr: []error{lost}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			res, err := outcome.Written(tc.res, tc.err, tc.writeErr)
			g.Expect(res).To(Equal(tc.want))
			if len(tc.wantErr) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			for _, w := range tc.wantErr {
				g.Expect(errors.Is(err, w)).To(BeTrue(), "%v wraps %v", err, w)
			}
			g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(Equal(tc.terminal))
		})
	}
}
