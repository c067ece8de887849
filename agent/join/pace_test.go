package join

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// A 429 with Retry-After comes back to the caller at once, the server's
// advice in the error, where client-go alone would wait exactly that long
// and try again inside the same call.
func TestPacingReturnsThe429WithItsAdvice(t *testing.T) {
	g := NewWithT(t)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Retry-After", "7")
		http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
	}))
	defer srv.Close()
	c, err := upstream.NewClient(withPacing(upstream.Config(srv.URL, nil, "token")))
	g.Expect(err).NotTo(HaveOccurred())
	reg := &fleet.ClusterRegistration{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "request-1"}}

	start := time.Now()
	err = c.Create(context.Background(), reg)
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "no wait inside the call")
	g.Expect(requests.Load()).To(Equal(int32(1)), "no retry inside the call")
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "%v", err)
	g.Expect(transient(err)).To(BeTrue())
	seconds, ok := apierrors.SuggestsClientDelay(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(seconds).To(Equal(7))
}

// What other errors a client gets is unchanged: a 429 without Retry-After,
// and any other status.
func TestPacingLeavesOtherResponses(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer srv.Close()
	c, err := upstream.NewClient(withPacing(upstream.Config(srv.URL, nil, "token")))
	g.Expect(err).NotTo(HaveOccurred())
	err = c.Get(context.Background(), types.NamespacedName{Namespace: "fleet-default", Name: "request-1"}, &fleet.ClusterRegistration{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
}

// The wait after a 429 is at least what the server asked and at most twice
// that, spread: agents refused in the same second come back over as many
// seconds as they were asked to wait.
func TestRetryWaitSpreadsTheServersAdvice(t *testing.T) {
	g := NewWithT(t)
	busy := apierrors.NewTooManyRequests("busy", 32)
	seen := map[time.Duration]bool{}
	for range 200 {
		d := retryWait(busy, time.Second)
		g.Expect(d).To(And(BeNumerically(">=", 32*time.Second), BeNumerically("<", 64*time.Second)))
		seen[d.Truncate(time.Second)] = true
	}
	g.Expect(len(seen)).To(BeNumerically(">", 16), "spread over the seconds after the advice")
	g.Expect(retryWait(apierrors.NewInternalError(context.Canceled), time.Second)).To(Equal(time.Second), "no advice: the fallback")
}

// client-go finds the transport underneath, to cancel what timed out.
func TestPacingWrapsItsTransport(t *testing.T) {
	var rt http.RoundTripper = pacing{next: http.DefaultTransport}
	w, ok := rt.(utilnet.RoundTripperWrapper)
	if !ok || w.WrappedRoundTripper() != http.DefaultTransport {
		t.Fatalf("pacing does not expose the transport it wraps")
	}
}
