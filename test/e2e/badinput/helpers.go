package badinput

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/framework"
)

const (
	ws = fleet.DefaultWorkspace
	// agentEnv is the env label of the cluster with a real agent.
	agentEnv = "agent"
)

// Timeouts: generous but bounded; everything here reacts within seconds.
const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr() string {
	GinkgoHelper()
	addr, err := framework.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	return addr
}

func every(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func must(err error) {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
}

func describe(obj client.Object) string {
	return fmt.Sprintf("%s/%s", obj.GetNamespace(), obj.GetName())
}
