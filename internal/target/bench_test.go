package target

import (
	"fmt"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// BenchmarkMatch matches 10 compiled bundles against 5000 clusters; one op is
// the whole sweep of 50000 matches. It reports ns/match and allocs/match,
// which should stay at 0 once AllMatches results are cached.
func BenchmarkMatch(b *testing.B) {
	const nClusters, nBundles = 5000, 10
	envs := []string{"dev", "staging", "prod"}
	regions := []string{"eu", "us", "ap", "sa"}

	groups := make([]*CompiledGroup, 0, len(regions))
	for _, r := range regions {
		g, err := CompileGroup(&fleet.ClusterGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "region-" + r, Namespace: "fleet-default", Labels: map[string]string{"region": r}},
			Spec:       fleet.ClusterGroupSpec{Selector: sel("region", r)},
		})
		if err != nil {
			b.Fatal(err)
		}
		groups = append(groups, g)
	}
	clusters := make([]*ClusterInfo, nClusters)
	for i := range clusters {
		clusters[i] = ClusterInfoFor(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("cluster-%d", i),
			Namespace: "fleet-default",
			Labels: map[string]string{
				"env":    envs[i%len(envs)],
				"region": regions[i%len(regions)],
				"shard":  fmt.Sprint(i % 16),
				"team":   fmt.Sprintf("team-%d", i%7),
			},
		}}, groups)
	}

	for _, mode := range []fleet.TargetCustomizationMode{fleet.FirstMatch, fleet.AllMatches} {
		bundles := make([]*CompiledBundle, nBundles)
		for j := range bundles {
			bundle := &fleet.Bundle{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bundle-%d", j), Namespace: "fleet-default"},
				Spec: fleet.BundleSpec{
					TargetCustomizationMode: mode,
					BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: values(map[string]interface{}{"replicas": 1.0})},
					Targets: []fleet.BundleTarget{
						{Name: "skip-shard", ClusterSelector: sel("shard", fmt.Sprint(j)), DoNotDeploy: true},
						{Name: "one", ClusterName: fmt.Sprintf("cluster-%d", j)},
						{Name: "prod-eu", ClusterSelector: sel("env", "prod"), ClusterGroupSelector: sel("region", "eu"),
							BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: values(map[string]interface{}{"replicas": 3.0})}},
						{Name: "teams", ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
							{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"team-1", "team-2", "team-3"}},
						}}, BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "teams"}},
						{Name: "us", ClusterGroup: "region-us"},
						{Name: "rest", ClusterSelector: &metav1.LabelSelector{}},
					},
					TargetRestrictions: []fleet.BundleTargetRestriction{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}},
				},
			}
			cb, err := Compile(bundle)
			if err != nil {
				b.Fatal(err)
			}
			bundles[j] = cb
		}
		b.Run(string(mode), func(b *testing.B) {
			// Warm the AllMatches cache so the numbers show steady state.
			for _, cb := range bundles {
				for _, c := range clusters {
					cb.Match(c)
				}
			}
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			matched := 0
			for b.Loop() {
				for _, cb := range bundles {
					for _, c := range clusters {
						if _, ok := cb.Match(c); ok {
							matched++
						}
					}
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			matches := float64(b.N) * nClusters * nBundles
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/matches, "ns/match")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/matches, "allocs/match")
			b.ReportMetric(float64(matched)/float64(b.N), "targeted/op")
		})
	}
}
