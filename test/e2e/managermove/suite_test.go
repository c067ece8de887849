package managermove_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/managermove"
	"github.com/gitfleet/fleet/test/framework"
)

// suite is what BeforeSuite sets up: two manager control planes, two
// downstream ones, and the binaries.
type suite struct {
	managers, workloads []*controlplane.ControlPlane
	logDir              string
}

func (s *suite) setUp() {
	built := make(chan error, 1)
	go func() { _, err := framework.Binaries(); built <- err }()
	var err error
	s.managers, err = controlplane.StartN(2, "manager", controlplane.Options{})
	Expect(err).NotTo(HaveOccurred())
	s.workloads, err = controlplane.StartN(2, "workload", controlplane.Options{NoCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	Expect(<-built).To(Succeed())
	s.logDir, err = os.MkdirTemp("", "fleet-e2e-managermove-")
	Expect(err).NotTo(HaveOccurred())
	fmt.Println("Logs of managers and agents are in", s.logDir)
}

func (s *suite) tearDown() {
	for _, cp := range append(append([]*controlplane.ControlPlane{}, s.managers...), s.workloads...) {
		if cp != nil {
			_ = cp.Stop()
		}
	}
	framework.RemoveBinaries()
}

func TestManagerMove(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	s := &suite{}
	BeforeSuite(s.setUp)
	AfterSuite(s.tearDown)
	Describe("Agents following their manager", Ordered, func() {
		managermove.MoveSpec(ctx, func() managermove.SpecInput {
			return managermove.SpecInput{Managers: s.managers, Workloads: s.workloads, LogDir: s.logDir}
		})
	})
	RunSpecs(t, "Agents following their manager")
}
