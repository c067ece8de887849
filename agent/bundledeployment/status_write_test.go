package bundledeployment_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/agent/bundledeployment"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// TestStatusOnlyWrite checks the agent's status write against the real API
// server: a body without the spec changes the status only, leaves the spec
// and the other writer's managed fields as they were, writes every count,
// and a status computed from a stale version is refused.
func TestStatusOnlyWrite(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "status-only", Namespace: clusterNamespace, Labels: map[string]string{"team": "a"}},
		Spec: fleet.BundleDeploymentSpec{
			DeploymentID: "s-1:abc",
			Options: fleet.BundleDeploymentOptions{DefaultNamespace: "apps",
				Helm: &fleet.HelmOptions{ReleaseName: "web", Values: &fleet.GenericMap{Data: map[string]any{"replicas": int64(3)}}}},
		},
	}
	g.Expect(up.Create(ctx, bd, client.FieldOwner("fleet-manager"))).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(up.Delete(context.Background(), bd)) })
	created := &fleet.BundleDeployment{}
	g.Expect(up.Get(ctx, client.ObjectKeyFromObject(bd), created)).To(Succeed())
	managerFields := managedBy(created, "fleet-manager")
	g.Expect(managerFields).NotTo(BeEmpty())

	stale := created.DeepCopy()
	written := created.DeepCopy()
	written.Status.AppliedDeploymentID = written.Spec.DeploymentID
	written.Status.Ready = true
	written.Status.ResourceCounts = fleet.ResourceCounts{DesiredReady: 1, Ready: 1}
	body, err := bundledeployment.StatusOnly(written)
	g.Expect(err).NotTo(HaveOccurred())
	_, hasSpec := body.Object["spec"]
	g.Expect(hasSpec).To(BeFalse(), "the body carries no spec")
	g.Expect(up.Status().Update(ctx, body, client.FieldOwner("fleet-agent"))).To(Succeed())

	got := &fleet.BundleDeployment{}
	g.Expect(up.Get(ctx, client.ObjectKeyFromObject(bd), got)).To(Succeed())
	g.Expect(got.Spec).To(Equal(created.Spec), "the spec is kept")
	g.Expect(got.Labels).To(Equal(created.Labels))
	g.Expect(got.Status.AppliedDeploymentID).To(Equal("s-1:abc"))
	g.Expect(got.Status.Ready).To(BeTrue())
	g.Expect(managedBy(got, "fleet-manager")).To(Equal(managerFields), "the manager still owns the spec it wrote")
	// Each of spec and status has one writer and is tracked as one field
	// (the CRD marks both atomic): the managed fields stay small, which
	// every write of a BundleDeployment pays for on the API server.
	g.Expect(managedBy(got, "fleet-agent")).To(MatchJSON(`{"f:status":{}}`))
	g.Expect(managerFields).To(ContainSubstring(`"f:spec":{}`))

	// Counts that are zero are written too: Fleet's readers expect them all.
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(fleet.GroupVersion.WithKind("BundleDeployment"))
	g.Expect(up.Get(ctx, client.ObjectKeyFromObject(bd), raw)).To(Succeed())
	counts, _, _ := unstructured.NestedMap(raw.Object, "status", "resourceCounts")
	g.Expect(counts).To(HaveKey("modified"))
	g.Expect(counts).To(HaveKey("orphaned"))

	// A status computed from the version before is refused, not merged.
	stale.Status.Ready = false
	body, err = bundledeployment.StatusOnly(stale)
	g.Expect(err).NotTo(HaveOccurred())
	err = up.Status().Update(ctx, body, client.FieldOwner("fleet-agent"))
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "a stale status write is a conflict, got %v", err)
}

// managedBy is the fieldsV1 that manager owns in obj, as JSON.
func managedBy(obj client.Object, manager string) string {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager && e.FieldsV1 != nil {
			return e.FieldsV1.GetRawString()
		}
	}
	return ""
}
