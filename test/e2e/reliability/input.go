package reliability

import (
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/test/controlplane"
)

// SpecInput is what the specs of this package run against.
type SpecInput struct {
	// ControlPlane is the manager's control plane, with the fleet CRDs.
	ControlPlane *controlplane.ControlPlane
	// Admin is an admin client of it, with the manager's scheme.
	Admin client.Client
	// LogDir receives the logs of the manager processes.
	LogDir string
}

func (in SpecInput) validate(spec string) {
	Expect(in.ControlPlane).NotTo(BeNil(), "%s: SpecInput.ControlPlane is required", spec)
	Expect(in.Admin).NotTo(BeNil(), "%s: SpecInput.Admin is required", spec)
	Expect(in.LogDir).NotTo(BeEmpty(), "%s: SpecInput.LogDir is required", spec)
}
