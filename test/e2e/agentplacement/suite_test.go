package agentplacement_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/agentmanifest"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/agentplacement"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

const pullSecret = "regcred"

// suiteInput: a manager control plane with the manager's controllers in
// this process (agent Bundles, Fleet's per-object metrics, a pull secret, the
// system-store TLS mode and a garbage collection interval for the agents it
// installs), one bare downstream control plane, and the binaries.
var suiteInput = e2e.SuiteInput{
	Name:              "agentplacement",
	Upstream:          &controlplane.Options{},
	Downstreams:       1,
	DownstreamOptions: controlplane.Options{NoCRDs: true},
	Binaries:          true,
	ManagerMetrics:    true,
	Manager: &controllers.Options{
		AgentBundles:                   true,
		PerObjectMetrics:               true,
		AgentImagePullSecrets:          []string{pullSecret},
		AgentTLSMode:                   agentmanifest.TLSModeSystemStore,
		AgentGarbageCollectionInterval: 30 * time.Minute,
	},
	DevLogs: true,
}

func TestAgentPlacement(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var s *e2e.Suite
	BeforeSuite(func() {
		s = e2e.SetUpSuite(ctx, suiteInput)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleet.DefaultSystemNamespace}}
		if err := s.Admin.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(s.Admin.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultSystemNamespace, Name: pullSecret},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"dTpw"}}}`)},
		})).To(Succeed())
	})
	input := func() agentplacement.SpecInput {
		return agentplacement.SpecInput{Upstream: s.Upstream, Admin: s.Admin, Downstream: s.Downstreams[0], LogDir: s.LogDir,
			MetricsURL: s.MetricsURL, PullSecret: pullSecret, SystemNamespace: fleet.DefaultSystemNamespace}
	}
	Describe("Agent placement and pulling", Ordered, func() { agentplacement.PlacementSpec(ctx, input) })
	RunSpecs(t, "Agent placement e2e")
}
