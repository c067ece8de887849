package summary

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestPerClusterCounts(t *testing.T) {
	g := NewWithT(t)
	bd := func(ns, cluster string, counts fleet.ResourceCounts) *fleet.BundleDeployment {
		return &fleet.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fleet.ClusterNamespaceLabel: ns, fleet.ClusterLabel: cluster}},
			Status:     fleet.BundleDeploymentStatus{ResourceCounts: counts},
		}
	}
	g.Expect(PerClusterCounts(nil)).To(BeNil())
	got := PerClusterCounts([]*fleet.BundleDeployment{
		bd("fleet-default", "a", fleet.ResourceCounts{DesiredReady: 2, Ready: 2}),
		bd("fleet-default", "a", fleet.ResourceCounts{DesiredReady: 1, NotReady: 1}),
		bd("fleet-default", "b", fleet.ResourceCounts{DesiredReady: 1, Missing: 1}),
		bd("other", "a", fleet.ResourceCounts{DesiredReady: 1, Ready: 1}),
	})
	g.Expect(got).To(Equal(map[string]*fleet.ResourceCounts{
		"fleet-default/a": {DesiredReady: 3, Ready: 2, NotReady: 1},
		"fleet-default/b": {DesiredReady: 1, Missing: 1},
		"other/a":         {DesiredReady: 1, Ready: 1},
	}))

	many := make([]*fleet.BundleDeployment, 0, MaxPerClusterCounts+5)
	for i := range MaxPerClusterCounts + 5 {
		many = append(many, bd("ws", fmt.Sprintf("c%05d", i), fleet.ResourceCounts{DesiredReady: 1, Ready: 1}))
	}
	capped := PerClusterCounts(many)
	g.Expect(capped).To(HaveLen(MaxPerClusterCounts))
	g.Expect(capped).To(HaveKey("ws/c00000"))
	g.Expect(capped).NotTo(HaveKey(fmt.Sprintf("ws/c%05d", MaxPerClusterCounts)))
}
