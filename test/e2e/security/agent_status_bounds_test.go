package security_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/bundledeployment"
	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// An agent's credential (foothold b) writes the status of its cluster's
// BundleDeployments, which the manager caches for every cluster, and renews
// its check-in Lease. A compromised agent must not make the manager hold
// an unbounded status, nor fill its cluster namespace with Leases.
var _ = Describe("Agent status bounds", func() {
	It("an agent's credential writes no oversized status and creates no Lease but its check-in", func() {
		ctx := env.Ctx
		ws := workspace(ctx, "sec-status-bounds")
		_, cred, cluster := checkedInVictim(ctx, ws, "sec-status-bounds-agent")
		agent, err := upstream.NewClient(cred.RESTConfig())
		Expect(err).NotTo(HaveOccurred())

		By("the manager's BundleDeployment for the agent's cluster")
		Expect(env.Admin.Create(ctx, &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "bounded"},
			Spec: fleet.BundleSpec{
				Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bounded}\n"}},
				Targets:   []fleet.BundleTarget{{Name: "one", ClusterName: cluster.Name}},
			}})).To(Succeed())
		key := client.ObjectKey{Namespace: cred.ClusterNamespace, Name: "bounded"}
		before := &fleet.BundleDeployment{}
		Eventually(func() error { return env.Admin.Get(ctx, key, before) }, time.Minute, 200*time.Millisecond).Should(Succeed())

		oversized := map[string]func(*fleet.BundleDeploymentStatus){
			"status.resources": func(st *fleet.BundleDeploymentStatus) {
				for range fleet.MaxStatusResources + 1 {
					st.Resources = append(st.Resources, fleet.BundleDeploymentResource{Kind: "ConfigMap", APIVersion: "v1", Namespace: "x", Name: "padding"})
				}
			},
			"status.nonReadyStatus": func(st *fleet.BundleDeploymentStatus) {
				for range fleet.MaxStatusEntries + 1 {
					st.NonReadyStatus = append(st.NonReadyStatus, fleet.NonReadyStatus{Kind: "Deployment", Name: "d"})
				}
			},
			"status.modifiedStatus[0].patch": func(st *fleet.BundleDeploymentStatus) {
				st.ModifiedStatus = []fleet.ModifiedStatus{{Kind: "ConfigMap", Name: "c", Patch: strings.Repeat("p", 64*1024)}}
			},
			"status.display.deployed": func(st *fleet.BundleDeploymentStatus) {
				st.Display.Deployed = strings.Repeat("d", fleet.MaxStatusMessageLength+1)
			},
		}
		for field, inflate := range oversized {
			By("writing an oversized " + field + " with the agent's credential")
			bd := &fleet.BundleDeployment{}
			Expect(agent.Get(ctx, key, bd)).To(Succeed())
			inflate(&bd.Status)
			body, err := bundledeployment.StatusOnly(bd)
			Expect(err).NotTo(HaveOccurred())
			err = agent.Status().Update(ctx, body)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(field))
		}
		after := &fleet.BundleDeployment{}
		Expect(env.Admin.Get(ctx, key, after)).To(Succeed())
		Expect(after.Status.Resources).To(HaveLen(len(before.Status.Resources)))
		Expect(after.Status.NonReadyStatus).To(HaveLen(len(before.Status.NonReadyStatus)))
		Expect(after.Status.Display.Deployed).NotTo(HavePrefix("ddd"))

		By("what the agent cuts such a status to is written")
		bd := &fleet.BundleDeployment{}
		Expect(agent.Get(ctx, key, bd)).To(Succeed())
		for _, inflate := range oversized {
			inflate(&bd.Status)
		}
		bundledeployment.BoundStatus(&bd.Status)
		body, err := bundledeployment.StatusOnly(bd)
		Expect(err).NotTo(HaveOccurred())
		Expect(agent.Status().Update(ctx, body)).To(Succeed())
		Expect(env.Admin.Get(ctx, key, after)).To(Succeed())
		Expect(after.Status.Resources).To(HaveLen(fleet.MaxStatusResources))
		Expect(after.Status.IncompleteState).To(BeTrue())

		By("creating a Lease other than the check-in with the agent's credential")
		forbidden := func(g Gomega, err error) {
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring("creates only its check-in Lease, " + fleet.AgentLeaseName))
		}
		// The admission policy is in force a moment after the install:
		// the first refusal is waited for, and what got through removed.
		Eventually(func(g Gomega) {
			extra := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cred.ClusterNamespace, Name: "extra"}}
			err := agent.Create(ctx, extra)
			if err == nil {
				_ = env.Admin.Delete(ctx, extra)
			}
			forbidden(g, err)
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		err = agent.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cred.ClusterNamespace, GenerateName: "flood-"}})
		forbidden(Default, err)

		By("the check-in Lease is still made and renewed with the same credential")
		Expect(env.Admin.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cred.ClusterNamespace, Name: fleet.AgentLeaseName}})).To(Succeed())
		checkIn(ctx, cred)
		checkIn(ctx, cred)
		leases := &coordinationv1.LeaseList{}
		Expect(env.Admin.List(ctx, leases, client.InNamespace(cred.ClusterNamespace))).To(Succeed())
		Expect(leases.Items).To(HaveLen(1))
		Expect(leases.Items[0].Name).To(Equal(fleet.AgentLeaseName))
	})
})
