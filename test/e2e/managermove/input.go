package managermove

import (
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/test/controlplane"
)

// SpecInput is what the specs of this package run against.
type SpecInput struct {
	// Managers are two bare control planes for managers: the first one the
	// agents join, the second the one rebuilt at a new URL.
	Managers []*controlplane.ControlPlane
	// Workloads are two downstream control planes whose agents move.
	Workloads []*controlplane.ControlPlane
	// LogDir receives the managers' and agents' logs.
	LogDir string
}

func (in SpecInput) validate(spec string) {
	Expect(in.Managers).To(HaveLen(2), "%s: SpecInput.Managers needs two control planes", spec)
	Expect(in.Workloads).To(HaveLen(2), "%s: SpecInput.Workloads needs two control planes", spec)
	Expect(in.LogDir).NotTo(BeEmpty(), "%s: SpecInput.LogDir is required", spec)
}
