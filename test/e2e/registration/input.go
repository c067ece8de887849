package registration

import (
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/test/controlplane"
)

// SpecInput is what TokenRegistrationSpec runs against.
type SpecInput struct {
	// Upstream is the manager's control plane, the manager running on it.
	Upstream *controlplane.ControlPlane
	// Downstreams are two control planes that join it.
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
