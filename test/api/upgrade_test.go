package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/bundledeployment"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/config/crd"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
)

// TestBundleDeploymentsKeepWorkingWhenSpecAndStatusBecomeAtomic upgrades the
// BundleDeployment CRD of a running fleet from the schema that tracked spec
// and status field by field to the current one, which tracks each whole: a
// BundleDeployment written before takes the manager's spec update and the
// agent's status write after, keeps what they wrote, and its managed fields
// collapse to one field per writer.
func TestBundleDeploymentsKeepWorkingWhenSpecAndStatusBecomeAtomic(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(controlplane.Options{Name: "crd-upgrade", NoCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cp.Stop() }()
	scheme := controllers.Scheme()
	g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	c, err := cp.Client(scheme)
	g.Expect(err).NotTo(HaveOccurred())

	crds, err := crd.CRDs()
	g.Expect(err).NotTo(HaveOccurred())
	var current *apiextensionsv1.CustomResourceDefinition
	for _, x := range crds {
		if x.Spec.Names.Kind == "BundleDeployment" {
			current = x
		}
	}
	g.Expect(current).NotTo(BeNil())
	root := current.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties
	g.Expect(root["spec"].XMapType).To(HaveValue(Equal("atomic")), "the generated CRD tracks the spec whole")
	g.Expect(root["status"].XMapType).To(HaveValue(Equal("atomic")), "the generated CRD tracks the status whole")

	// The schema before: the same, spec and status tracked field by field.
	before := current.DeepCopy()
	props := before.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties
	for _, k := range []string{"spec", "status"} {
		p := props[k]
		p.XMapType = nil
		props[k] = p
	}
	g.Expect(c.Create(ctx, before)).To(Succeed())
	established := func() {
		g.Eventually(func(g Gomega) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(before), got)).To(Succeed())
			g.Expect(got.Status.Conditions).To(ContainElement(And(
				HaveField("Type", apiextensionsv1.Established), HaveField("Status", apiextensionsv1.ConditionTrue))))
			// The served schema is the stored one: a BundleDeployment
			// can be listed.
			g.Expect(c.List(ctx, &fleet.BundleDeploymentList{})).To(Succeed())
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	}
	established()
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-a"}})).To(Succeed())
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "cluster-a"},
		Spec:       fleet.BundleDeploymentSpec{DeploymentID: "s-1:a", Options: fleet.BundleDeploymentOptions{DefaultNamespace: "apps"}},
	}
	g.Expect(c.Create(ctx, bd, client.FieldOwner("fleet-manager"))).To(Succeed())
	writeStatus := func(ready bool) {
		bd.Status.AppliedDeploymentID, bd.Status.Ready = bd.Spec.DeploymentID, ready
		bd.Status.ResourceCounts = fleet.ResourceCounts{DesiredReady: 1, Ready: 1}
		body, err := bundledeployment.StatusOnly(bd)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Status().Update(ctx, body, client.FieldOwner("fleet-agent"))).To(Succeed())
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bd), bd)).To(Succeed())
	}
	writeStatus(true)
	g.Expect(managedFieldsOf(bd, "fleet-agent")).NotTo(MatchJSON(`{"f:status":{}}`), "tracked field by field before")

	// The upgrade.
	live := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(current), live)).To(Succeed())
	live.Spec = current.Spec
	g.Expect(c.Update(ctx, live)).To(Succeed())
	established()
	probes := 0
	g.Eventually(func(g Gomega) {
		// The new schema serves once a write's managed fields are whole.
		probes++
		probe := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", probes), Namespace: "cluster-a"}}
		g.Expect(c.Create(ctx, probe, client.FieldOwner("fleet-manager"))).To(Succeed())
		g.Expect(managedFieldsOf(probe, "fleet-manager")).To(MatchJSON(`{"f:spec":{}}`))
	}, 30*time.Second, 500*time.Millisecond).Should(Succeed())

	bd.Spec.DeploymentID = "s-2:b"
	g.Expect(c.Update(ctx, bd, client.FieldOwner("fleet-manager"))).To(Succeed())
	writeStatus(false)
	g.Expect(bd.Spec.DeploymentID).To(Equal("s-2:b"))
	g.Expect(bd.Spec.Options.DefaultNamespace).To(Equal("apps"))
	g.Expect(bd.Status.AppliedDeploymentID).To(Equal("s-2:b"))
	g.Expect(bd.Status.Ready).To(BeFalse())
	g.Expect(bd.Status.ResourceCounts.DesiredReady).To(Equal(1))
	g.Expect(managedFieldsOf(bd, "fleet-agent")).To(MatchJSON(`{"f:status":{}}`))
	g.Expect(managedFieldsOf(bd, "fleet-manager")).To(MatchJSON(`{"f:spec":{}}`))
}

// managedFieldsOf is the fieldsV1 manager owns in obj, as JSON.
func managedFieldsOf(obj client.Object, manager string) string {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager && e.FieldsV1 != nil {
			return e.FieldsV1.GetRawString()
		}
	}
	return ""
}
