package join

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gitfleet/fleet/agent/backoff"
)

func TestRequestName(t *testing.T) {
	g := NewWithT(t)
	a := RequestName("6a1f0c2e-uid", "00112233445566778899aabbccddeeff")
	g.Expect(a).To(Equal(RequestName("6a1f0c2e-uid", "00112233445566778899aabbccddeeff")), "a retried create names the same object")
	g.Expect(a).NotTo(Equal(RequestName("6a1f0c2e-uid", "ffeeddccbbaa99887766554433221100")), "a new request is a new object")
	g.Expect(a).To(HavePrefix("request-"))
	g.Expect(validation.IsDNS1123Subdomain(a)).To(BeEmpty())
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestTransient(t *testing.T) {
	g := NewWithT(t)
	gr := schema.GroupResource{Group: "fleet.cattle.io", Resource: "clusterregistrations"}
	g.Expect(transient(apierrors.NewTooManyRequests("busy", 1))).To(BeTrue())
	g.Expect(transient(apierrors.NewServerTimeout(gr, "create", 1))).To(BeTrue())
	g.Expect(transient(fmt.Errorf("post: %w", timeoutErr{}))).To(BeTrue())
	g.Expect(transient(context.DeadlineExceeded)).To(BeTrue())
	g.Expect(transient(apierrors.NewUnauthorized("expired"))).To(BeFalse())
	g.Expect(transient(apierrors.NewForbidden(gr, "x", errors.New("no")))).To(BeFalse())
	g.Expect(transient(errors.New("connection refused"))).To(BeFalse())
}

// polls counts the looks at a registration granted after grant, with the
// waits pollWait gives, and how late the last one saw the grant.
func polls(grant time.Duration) (n int, late time.Duration) {
	b := &backoff.Backoff{Min: 250 * time.Millisecond, Max: 3 * time.Second}
	waited := time.Duration(0)
	for {
		n++
		if waited >= grant {
			return n, waited - grant
		}
		waited += pollWait(b, waited)
	}
}

func TestPollWait(t *testing.T) {
	// A grant within a second is seen within a second, as before.
	for range 100 {
		if _, late := polls(800 * time.Millisecond); late > time.Second {
			t.Fatalf("a grant after 0.8 s was seen %s late", late)
		}
	}
	// Waits grow with the time waited, up to the bound.
	b := &backoff.Backoff{Min: 250 * time.Millisecond, Max: 3 * time.Second}
	for _, waited := range []time.Duration{0, time.Second, 10 * time.Second, time.Minute, 10 * time.Minute} {
		d := pollWait(b, waited)
		if d > maxPollWait || d > max(3*time.Second, waited/3) {
			t.Errorf("after %s the wait is %s: above a third of it (or 3 s) or %s", waited, d, maxPollWait)
		}
	}
	// Thousands waiting a minute and a half poll at most 20 times, two thirds
	// of the 30 that the backoff alone needs at the least (its waits never
	// exceed 3 s; 39 to 50 in practice), and see their grant at most a third
	// of the wait late.
	for range 100 {
		n, late := polls(90 * time.Second)
		if n > 20 || late > 30*time.Second {
			t.Fatalf("a grant after 90 s took %d polls and was seen %s late", n, late)
		}
	}
}
