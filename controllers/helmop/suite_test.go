package helmop_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/helmop"
	"github.com/gitfleet/fleet/internal/bundlereader"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/test/envtest"
)

var (
	ctx = context.Background()
	env *envtest.Environment
)

// TestMain runs this package's tests against one control plane, with only
// the HelmOp reconciler running, as the manager runs it; chart repositories
// are served on loopback by each test.
func TestMain(m *testing.M) {
	os.Exit(envtest.Run(ctx, envtest.RunInput{
		M:    m,
		Name: "helmop",
		SetupReconcilers: func(_ context.Context, mgr ctrl.Manager) error {
			return (&helmop.Reconciler{Client: mgr.GetClient(), Workers: 4, Egress: egress.AllowLoopback()}).SetupWithManager(mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

const (
	eventually = 30 * time.Second
	poll       = 100 * time.Millisecond
)

// newNamespace creates a namespace for one test, whose HelmOps are deleted
// when it ends (no namespace controller runs).
func newNamespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ns, err := env.CreateNamespace(ctx, "helmop")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		g := NewWithT(t)
		g.Expect(env.DeleteAllOf(ctx, &fleet.HelmOp{}, client.InNamespace(ns.Name))).To(Succeed())
		g.Eventually(func() []fleet.HelmOp {
			list := &fleet.HelmOpList{}
			g.Expect(env.List(ctx, list, client.InNamespace(ns.Name))).To(Succeed())
			return list.Items
		}).WithTimeout(eventually).WithPolling(poll).Should(BeEmpty(), "the HelmOps of %s gone", ns.Name)
	})
	return ns.Name
}

func getHelmOp(g Gomega, ns, name string) func() *fleet.HelmOp {
	return func() *fleet.HelmOp {
		op := &fleet.HelmOp{}
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, op)).To(Succeed())
		return op
	}
}

// bundleChartVersion returns the version of chart in the HelmOp's Bundle,
// "" when there is no Bundle: the version its agents download (helm.version
// of a Bundle with helmOpOptions, which holds no chart), or the one in the
// Chart.yaml of the chart it holds.
func bundleChartVersion(g Gomega, ns, name, chart string) func() string {
	return func() string {
		b := &fleet.Bundle{}
		if err := env.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
			return ""
		}
		if b.Spec.HelmOpOptions != nil {
			g.Expect(b.Spec.Resources).To(BeEmpty(), "a bundle whose agents download the chart holds none")
			return b.Spec.Helm.Version
		}
		for _, r := range b.Spec.Resources {
			if r.Name == chart+"/Chart.yaml" {
				data, err := bundlereader.DecodeResource(r)
				g.Expect(err).NotTo(HaveOccurred())
				var meta struct{ Version string }
				g.Expect(yamlUnmarshal(data, &meta)).To(Succeed())
				return meta.Version
			}
		}
		return "(no chart)"
	}
}

// condition matches a HelmOp whose condition t has the status, reason and
// a message containing msg.
func condition(t string, status metav1.ConditionStatus, reason, msg string) OmegaMatcher {
	return WithTransform(func(op *fleet.HelmOp) metav1.Condition {
		for _, c := range op.Status.Conditions {
			if c.Type == t {
				return c
			}
		}
		return metav1.Condition{}
	}, And(
		HaveField("Status", status),
		HaveField("Reason", reason),
		HaveField("Message", ContainSubstring(msg)),
	))
}
