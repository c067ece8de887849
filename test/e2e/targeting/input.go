package targeting

import (
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SpecInput is what the specs of this package run against: a cluster where
// the manager runs, with no agents (the specs report status as agents would).
type SpecInput struct {
	// Admin is an admin client of the manager's cluster, with the manager's
	// scheme.
	Admin client.Client
	// Kubeconfig is the path of an admin kubeconfig of the manager's
	// cluster, for the fleet binary (PreviewSpec).
	Kubeconfig string
	// MetricsURL is the manager's metrics endpoint (MetricsSpec only).
	MetricsURL string
}

func (in SpecInput) validate(spec string) {
	Expect(in.Admin).NotTo(BeNil(), "%s: SpecInput.Admin is required", spec)
}
