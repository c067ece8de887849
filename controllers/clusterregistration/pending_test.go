package clusterregistration

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

func TestAdmitBoundsPendingGrants(t *testing.T) {
	g := NewWithT(t)
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	binding := func(ns, name string, labels map[string]string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	for i := range 2 {
		g.Expect(idx.Add(binding("system", fmt.Sprint("pending-", i), map[string]string{registrationLabel: "r"}))).To(Succeed())
	}
	g.Expect(idx.Add(binding("system", "unrelated", nil))).To(Succeed())
	g.Expect(idx.Add(binding("elsewhere", "other", map[string]string{registrationLabel: "r"}))).To(Succeed())

	r := &Reconciler{SystemRegistrationNamespace: "system", MaxPending: 3, roleBinding: idx}
	now := time.Now()
	admit := func(at time.Time) bool {
		ok, err := r.admit(at)
		g.Expect(err).NotTo(HaveOccurred())
		return ok
	}
	g.Expect(admit(now)).To(BeTrue(), "2 of 3 pending: only token read bindings in the system namespace count")
	g.Expect(admit(now.Add(time.Millisecond))).To(BeFalse(), "the grant just let through counts before the cache shows it")

	g.Expect(idx.Delete(binding("system", "pending-0", nil))).To(Succeed())
	g.Expect(admit(now.Add(2*pendingRecount))).To(BeTrue(), "a pickup frees a place once recounted")
}
