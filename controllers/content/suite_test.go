package content_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/content"
	fleetcontent "github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/test/envtest"
)

var env *envtest.Environment

// grace is short, so that the tests see a Content collected in seconds.
const grace = 2 * time.Second

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:    m,
		Name: "content",
		SetupReconcilers: func(ctx context.Context, mgr ctrl.Manager) error {
			return (&content.Reconciler{Client: mgr.GetClient(), Grace: grace}).SetupWithManager(ctx, mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

func newContent(g *WithT, text string) *fleet.Content {
	_, build, err := fleetcontent.Encode([]fleet.BundleResource{{Name: "cm.yaml", Content: text}})
	g.Expect(err).NotTo(HaveOccurred())
	c, err := build()
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func TestUnreferencedContentIsCollected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newContent(g, "unreferenced")
	g.Expect(env.Create(ctx, c)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Get(ctx, client.ObjectKeyFromObject(c), &fleet.Content{}))
	}).WithTimeout(grace+20*time.Second).Should(BeTrue(), "the unreferenced Content deleted after its grace")
}

func TestReferencedContentStays(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "cluster")
	g.Expect(err).NotTo(HaveOccurred())
	c := newContent(g, "referenced")
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns.Name,
		Labels: map[string]string{fleet.ContentNameLabel: c.Name}}}
	g.Expect(env.CreateAndWait(ctx, bd)).To(Succeed())
	g.Expect(env.Create(ctx, c)).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := &fleet.Content{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		g.Expect(got.Status.ReferenceCount).To(Equal(1))
	}).WithTimeout(20*time.Second).Should(Succeed(), "the reference counted")

	// A count that moved and then stays is written once it settled.
	second := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns.Name,
		Labels: map[string]string{fleet.ContentNameLabel: c.Name}}}
	g.Expect(env.CreateAndWait(ctx, second)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &fleet.Content{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		g.Expect(got.Status.ReferenceCount).To(Equal(2))
	}).WithTimeout(30*time.Second).Should(Succeed(), "the second reference counted")
	g.Consistently(func() error {
		return env.Get(ctx, client.ObjectKeyFromObject(c), &fleet.Content{})
	}).WithTimeout(grace+time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the referenced Content kept past its grace")
}
