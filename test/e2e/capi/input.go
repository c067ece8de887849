package capi

import (
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/test/controlplane"
)

// ns holds the Cluster API Clusters of EnrollmentSpec and so their fleet
// Clusters.
const ns = "capi-e2e"

// SpecInput is what the specs of this package run against.
type SpecInput struct {
	// Upstream is the manager's control plane, with Cluster API's Cluster
	// CRD, the manager running on it with its capi and clusterimport
	// reconcilers.
	Upstream *controlplane.ControlPlane
	// Workloads are three bare control planes the Cluster API Clusters
	// point at.
	Workloads []*controlplane.ControlPlane
	// Admin is an admin client of Upstream that knows Cluster API's types.
	Admin client.WithWatch
	// LogDir receives the agents' logs.
	LogDir string
	// ImportStaleAfter is the manager's stale-agent time (its
	// ImportStaleAfter): short, so that healing can be watched.
	ImportStaleAfter time.Duration
	// Target is a second management cluster like Upstream, with a manager
	// of its own, and TargetAdmin its admin client: MoveSpec moves a
	// Cluster API Cluster there.
	Target      *controlplane.ControlPlane
	TargetAdmin client.WithWatch
}

func (in SpecInput) validate(spec string) {
	Expect(in.Upstream).NotTo(BeNil(), "%s: SpecInput.Upstream is required", spec)
	Expect(in.Workloads).To(HaveLen(3), "%s: SpecInput.Workloads needs three control planes", spec)
	Expect(in.Admin).NotTo(BeNil(), "%s: SpecInput.Admin is required", spec)
	Expect(in.LogDir).NotTo(BeEmpty(), "%s: SpecInput.LogDir is required", spec)
	Expect(in.ImportStaleAfter).To(BeNumerically(">", 0), "%s: SpecInput.ImportStaleAfter is required", spec)
}
