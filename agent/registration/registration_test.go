package registration

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
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
