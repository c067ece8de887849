package capi

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/controllers/clusterimport"
	"github.com/gitfleet/fleet/test/controlplane"
)

// OnboardingStormSpec enrolls 100 Cluster API Clusters at once, spread over
// the first two workload control planes, and reports how long the installs
// took.
func OnboardingStormSpec(ctx context.Context, inputGetter func() SpecInput) {
	e := &env{ctx: ctx}
	var (
		admin     client.WithWatch
		workloads []*controlplane.ControlPlane
	)
	BeforeEach(func() {
		input := inputGetter()
		input.validate("OnboardingStormSpec")
		e.set(input)
		admin, workloads = input.Admin, input.Workloads
	})

	It("enrolls 100 Cluster API Clusters at once and reports how long the installs took", func() {
		const n = 100
		const benchNS = "capi-bench"
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}})).To(Succeed())

		// 100 clusters share two workload control planes; each has its own
		// identity and agent namespace there, so that they do not collide.
		names := make([]string, n)
		for i := range n {
			names[i] = fmt.Sprintf("bench-%03d", i)
			c := e.createCAPICluster(capiCluster{name: names[i], namespace: benchNS, workload: workloads[i%2],
				labels: map[string]string{"bench": "true"},
				annotations: map[string]string{
					capi.AgentNamespaceAnnotation: "fleet-" + names[i],
					capi.ClientIDAnnotation:       names[i],
				}})
			e.initialize(c)
		}

		DeferCleanup(func() {
			Expect(admin.DeleteAllOf(ctx, &clusterv1.Cluster{}, client.InNamespace(benchNS))).To(Succeed())
		})

		// Poll the fleet Clusters (one List every 50ms) and note when each
		// first says Imported=Applied.
		var mu sync.Mutex
		applied := map[string]time.Time{}
		done := make(chan struct{})
		stopPolling := make(chan struct{})
		defer close(stopPolling)
		go func() {
			defer GinkgoRecover()
			for {
				select {
				case <-stopPolling:
					return
				case <-time.After(50 * time.Millisecond):
				}
				list := &fleet.ClusterList{}
				if err := admin.List(ctx, list, client.InNamespace(benchNS)); err != nil {
					continue
				}
				now := time.Now()
				mu.Lock()
				for _, c := range list.Items {
					cond := meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionImported)
					if _, seen := applied[c.Name]; !seen && cond != nil && cond.Reason == fleet.ReasonApplied {
						applied[c.Name] = now
						if len(applied) == n {
							close(done)
						}
					}
				}
				mu.Unlock()
			}
		}()

		By("writing the 100 kubeconfig Secrets at once")
		kcs := make([][]byte, 0, 2)
		for i := range 2 {
			kc, err := e.kubeconfigFor(i)
			Expect(err).NotTo(HaveOccurred())
			kcs = append(kcs, kc)
		}
		created := make([]time.Time, n)
		start := time.Now()
		var wg sync.WaitGroup
		for worker := range 10 {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				for i := worker; i < n; i += 10 {
					created[i] = time.Now()
					e.writeKubeconfigSecret(benchNS, names[i], workloads[i%2], kcs[i%2])
				}
			}()
		}
		wg.Wait()
		Eventually(done, 5*time.Minute, 200*time.Millisecond).Should(BeClosed(), func() string {
			mu.Lock()
			defer mu.Unlock()
			list := &fleet.ClusterList{}
			_ = admin.List(ctx, list, client.InNamespace(benchNS))
			sample := make([]any, 0, min(3, len(list.Items)))
			for i := range min(3, len(list.Items)) {
				sample = append(sample, list.Items[i].Status.Conditions)
			}
			return fmt.Sprintf("%d of %d applied; %d fleet Clusters; conditions of some: %v", len(applied), n, len(list.Items), sample)
		})

		mu.Lock()
		durations := make([]time.Duration, n)
		var last time.Time
		for i, name := range names {
			durations[i] = applied[name].Sub(created[i])
			if applied[name].After(last) {
				last = applied[name]
			}
		}
		mu.Unlock()
		slices.Sort(durations)
		msg := fmt.Sprintf("Enrolled %d Cluster API clusters at once (2 workload API servers, at most %d installs at a time): "+
			"all agents applied in %s; Secret to Imported=Applied p50 %s, p90 %s, p99 %s, max %s",
			n, clusterimport.DefaultMaxConcurrentInstalls, last.Sub(start).Round(time.Millisecond),
			percentile(durations, 50).Round(time.Millisecond), percentile(durations, 90).Round(time.Millisecond),
			percentile(durations, 99).Round(time.Millisecond), durations[n-1].Round(time.Millisecond))
		AddReportEntry("enroll-100", msg)
		GinkgoWriter.Println(msg)
		fmt.Println(msg)

		By("deleting them again")
		Expect(admin.DeleteAllOf(ctx, &clusterv1.Cluster{}, client.InNamespace(benchNS))).To(Succeed())
		Eventually(func() int {
			list := &fleet.ClusterList{}
			Expect(admin.List(ctx, list, client.InNamespace(benchNS))).To(Succeed())
			return len(list.Items)
		}, 2*time.Minute, 500*time.Millisecond).Should(BeZero())
	})
}
