package agent

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

// SpecInput is what AgentSpec runs against.
type SpecInput struct {
	// Upstream is the manager's control plane, the manager running on it
	// with a short ContentGrace and ClusterOfflineAfter (agents check in
	// every 5 seconds here).
	Upstream *controlplane.ControlPlane
	// Downstreams are two bare control planes that join it: dev and prod.
	Downstreams []*controlplane.ControlPlane
	// Admin is an admin client of Upstream, with the manager's scheme.
	Admin client.Client
	// LogDir receives the agents' logs.
	LogDir string
}

func (in SpecInput) validate(spec string) {
	Expect(in.Upstream).NotTo(BeNil(), "%s: SpecInput.Upstream is required", spec)
	Expect(in.Downstreams).To(HaveLen(2), "%s: SpecInput.Downstreams needs two control planes", spec)
	Expect(in.Admin).NotTo(BeNil(), "%s: SpecInput.Admin is required", spec)
	Expect(in.LogDir).NotTo(BeEmpty(), "%s: SpecInput.LogDir is required", spec)
}

// AgentSpec joins two downstream clusters, dev and prod (prod through a link
// the specs can cut), and checks what their agents deploy and how they
// survive faults. The specs share the two clusters and build on each other:
// call it in an Ordered container.
func AgentSpec(ctx context.Context, inputGetter func() SpecInput) {
	f := &fixture{ctx: ctx, dev: &cluster{ctx: ctx}, prod: &cluster{ctx: ctx}}
	BeforeAll(func() {
		input := inputGetter()
		input.validate("AgentSpec")
		f.admin, f.upstream = input.Admin, input.Upstream
		f.dev.join(input, input.Downstreams[0], nil, "env=dev")
		// prod reaches the manager through a link the tests can cut.
		link, err := framework.NewProxy(input.Upstream.Config.Host)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(link.Close)
		f.prod.join(input, input.Downstreams[1], link, "env=prod")
	})
	AfterAll(func() { // the agents span the specs
		for _, j := range []*cluster{f.dev, f.prod} {
			if j.JoinedCluster != nil {
				j.StopAgents()
			}
		}
	})
	Context("deploying bundles", func() {
		deploySpecs(f)
		driftSpecs(f)
		deployFailureSpecs(f)
	})
	Context("deploying HelmOps", func() { helmOpSpecs(f) })
	Context("surviving faults", func() {
		faultSpecs(f)
		connectionFaultSpecs(f)
		replicaSpecs(f)
		latencySpecs(f)
	})
}
