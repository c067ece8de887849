package agent

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/clusterregistration"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/test/controlplane"
)

// request is one request the agent sent and the status it got.
type request struct {
	method, path, contentType string
	status                    int
}

func (r request) String() string {
	return fmt.Sprintf("%s %s (%s) -> %d", r.method, r.path, r.contentType, r.status)
}

// recorder records the requests that pass through it.
type recorder struct {
	mu       sync.Mutex
	requests []request
}

func (rec *recorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		got := request{method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type")}
		if resp != nil {
			got.status = resp.StatusCode
		}
		rec.mu.Lock()
		rec.requests = append(rec.requests, got)
		rec.mu.Unlock()
		return resp, err
	})
}

// take returns the requests recorded since the last take.
func (rec *recorder) take() []request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r := rec.requests
	rec.requests = nil
	return r
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// An agent's start costs no refused request: its first check-in is one
// request the API server accepts whether the Lease is missing (first start)
// or there (restart), sent with the agent's own rights upstream (the
// fleet-agent ClusterRole bound in its cluster namespace). Every later
// check-in is one request too.
func TestCheckInCostsNoRefusedRequest(t *testing.T) {
	g := NewWithT(t)
	cp, err := controlplane.Start(controlplane.Options{Name: "agent-heartbeat", NoCRDs: true})
	if err != nil {
		t.Fatalf("starting a control plane: %v", err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	ctx := t.Context()
	admin, err := cp.Client(kinds.Scheme())
	g.Expect(err).NotTo(HaveOccurred())

	const clusterNS, otherNS, agentsNS, sa = "cluster-fleet-default-edge", "cluster-fleet-default-other", "fleet-agents", "edge"
	shared := clusterregistration.SharedRoles()
	objs := make([]client.Object, 0, 3+len(shared))
	objs = append(objs,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "fleet-agent"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterregistration.AgentRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: agentsNS}}},
	)
	for _, role := range shared {
		objs = append(objs, role)
	}
	for _, o := range objs {
		g.Expect(admin.Create(ctx, o)).To(Succeed(), "creating %T %s", o, o.GetName())
	}

	rec := &recorder{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + agentsNS + ":" + sa}
	cfg.Wrap(rec.wrap)
	c, err := upstream.NewClient(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	// The rights are the agent's: none on another cluster's namespace.
	err = c.Get(ctx, client.ObjectKey{Namespace: otherNS, Name: fleet.AgentLeaseName}, &coordinationv1.Lease{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "reading another cluster's Lease: %v", err)
	rec.take()

	lease := func() *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: fleet.AgentLeaseName}, l)).To(Succeed())
		return l
	}
	// beat checks in once and expects one accepted request of that type.
	beat := func(what string, h *Heartbeat, contentType string) {
		t.Helper()
		g.Expect(h.Beat(ctx)).To(Succeed(), what)
		sent := rec.take()
		g.Expect(sent).To(HaveLen(1), "%s: %v", what, sent)
		g.Expect(sent[0].method).To(Equal(http.MethodPatch), "%s: %v", what, sent)
		g.Expect(sent[0].contentType).To(Equal(contentType), "%s: %v", what, sent)
		g.Expect(sent[0].status).To(BeNumerically("<", 300), "%s: %v", what, sent)
	}
	const apply, merge = "application/apply-patch+yaml", "application/merge-patch+json"
	newHeartbeat := func() *Heartbeat {
		return &Heartbeat{Client: c, ClusterNamespace: clusterNS, AgentNamespace: "cattle-fleet-system", Interval: time.Minute}
	}

	// First start: no Lease yet.
	first := newHeartbeat()
	beat("first check-in of a first start", first, apply)
	l := lease()
	g.Expect(*l.Spec.HolderIdentity).To(Equal("cattle-fleet-system/" + fleet.AgentName))
	g.Expect(*l.Spec.LeaseDurationSeconds).To(BeEquivalentTo(60))
	g.Expect(l.Annotations).To(HaveKeyWithValue(fleet.AgentNamespaceAnnotation, "cattle-fleet-system"))
	renewed := l.Spec.RenewTime.Time
	beat("second check-in", first, merge)
	g.Expect(lease().Spec.RenewTime.Time).To(BeTemporally(">", renewed))

	// A renewal proof (written by merge patch, as registration does) is
	// not taken away by the next start's apply.
	g.Expect(checkin.Write(ctx, c, clusterNS, coordinationv1.LeaseSpec{},
		map[string]string{fleet.RenewalHashAnnotation: "proof"})).To(Succeed())
	rec.take()

	// Restart: the Lease is there, the new Heartbeat does not know it.
	renewed = lease().Spec.RenewTime.Time
	restarted := newHeartbeat()
	beat("first check-in after a restart", restarted, apply)
	l = lease()
	g.Expect(l.Spec.RenewTime.Time).To(BeTemporally(">", renewed))
	g.Expect(l.Annotations).To(HaveKeyWithValue(fleet.RenewalHashAnnotation, "proof"))
	g.Expect(l.Annotations).To(HaveKeyWithValue(fleet.AgentNamespaceAnnotation, "cattle-fleet-system"))
	beat("second check-in after a restart", restarted, merge)

	// A Lease deleted under a running agent is made again at its next
	// check-in (the patch refused, then a create).
	g.Expect(admin.Delete(ctx, lease())).To(Succeed())
	g.Expect(restarted.Beat(ctx)).To(Succeed())
	sent := rec.take()
	g.Expect(sent).To(HaveLen(2), "%v", sent)
	g.Expect(sent[0].status).To(Equal(http.StatusNotFound), "%v", sent)
	g.Expect(sent[1].method).To(Equal(http.MethodPost), "%v", sent)
	g.Expect(sent[1].status).To(Equal(http.StatusCreated), "%v", sent)
	g.Expect(*lease().Spec.HolderIdentity).To(Equal("cattle-fleet-system/" + fleet.AgentName))
}
