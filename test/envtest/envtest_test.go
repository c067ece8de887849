package envtest_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitfleet/fleet/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M: m, Name: "envtest", SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

func TestCreateAndWaitSeesTheObjectInTheCache(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "t")
	g.Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns.Name}}
	g.Expect(env.CreateAndWait(ctx, cm)).To(Succeed())
	g.Expect(env.Manager.GetCache().Get(ctx, types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}, &corev1.ConfigMap{})).To(Succeed())
}

func TestWaitForNamesWhatItWaitedFor(t *testing.T) {
	g := NewWithT(t)
	err := envtest.WaitFor(context.Background(), "the impossible", 100_000_000, func(context.Context) (bool, error) { return false, nil })
	g.Expect(err).To(MatchError(ContainSubstring("for the impossible")))
}
