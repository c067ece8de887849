package localcluster_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/test/envtest"
)

var env *envtest.Environment

// The whole manager runs (controllers.Setup, with its defaults): the local
// Cluster is kept by this package, its agent installed by the import
// controller and its group counted by the group controller.
func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:    m,
		Name: "localcluster",
		SetupReconcilers: func(ctx context.Context, mgr ctrl.Manager) error {
			// A default group left from before, with another selector and a
			// label of its own: at start the manager resets what it sets
			// (as Fleet re-applies its bootstrap objects) and keeps the rest.
			direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
			if err != nil {
				return err
			}
			o := controllers.Options{APIServerURL: "https://manager.example"}
			// The manager's own start step (Setup runs it again).
			if err := controllers.EnsureNamespaces(ctx, direct, direct, o); err != nil {
				return err
			}
			if err := direct.Create(ctx, &fleet.ClusterGroup{
				ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: fleet.LocalWorkspace, Labels: map[string]string{"team": "ops"}},
				Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": "elsewhere"}}},
			}); err != nil {
				return err
			}
			return controllers.Setup(ctx, mgr, o)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

const timeout = 30 * time.Second

var (
	clusterKey = types.NamespacedName{Namespace: "fleet-local", Name: "local"}
	groupKey   = types.NamespacedName{Namespace: "fleet-local", Name: "default"}
	secretKey  = types.NamespacedName{Namespace: "fleet-local", Name: "local-cluster"}
)

func TestTheManagerKeepsFleetLocal(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(env.Get(ctx, client.ObjectKey{Name: "fleet-local"}, &corev1.Namespace{})).To(Succeed())

	g.Eventually(func(g Gomega) {
		c := &fleet.Cluster{}
		g.Expect(env.Get(ctx, clusterKey, c)).To(Succeed())
		g.Expect(c.Labels).To(HaveKeyWithValue("name", "local"))
		g.Expect(c.Spec.KubeConfigSecret).To(Equal("local-cluster"))
	}).WithTimeout(timeout).Should(Succeed(), "the Cluster fleet-local/local")

	g.Eventually(func(g Gomega) {
		s := &corev1.Secret{}
		g.Expect(env.Get(ctx, secretKey, s)).To(Succeed())
		g.Expect(s.Labels).To(HaveKeyWithValue(fleet.ManagedLabel, "true"))
		// The local agent reaches the manager the way the manager reaches
		// its own API server, not at the URL given to remote clusters.
		g.Expect(string(s.Data["apiServerURL"])).To(Equal(env.Config.Host))
		g.Expect(s.Data["apiServerCA"]).To(Equal(env.Config.CAData))
		g.Expect(s.Data).NotTo(HaveKey("value"), "no credential in the Secret")
	}).WithTimeout(timeout).Should(Succeed(), "the Secret fleet-local/local-cluster")

	g.Eventually(func(g Gomega) {
		grp := &fleet.ClusterGroup{}
		g.Expect(env.Get(ctx, groupKey, grp)).To(Succeed())
		g.Expect(grp.Spec.Selector).To(Equal(&metav1.LabelSelector{MatchLabels: map[string]string{"name": "local"}}),
			"the selector the manager sets is put back at start")
		g.Expect(grp.Labels).To(HaveKeyWithValue("team", "ops"), "what the manager does not set is kept")
		g.Expect(grp.Status.ClusterCount).To(Equal(1), "the group selects the local Cluster")
	}).WithTimeout(timeout).Should(Succeed(), "the ClusterGroup fleet-local/default")
}

func TestTheLocalAgentIsInstalledIntoTheManagersOwnCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	kubeSystem := &corev1.Namespace{}
	g.Expect(env.Get(ctx, client.ObjectKey{Name: "kube-system"}, kubeSystem)).To(Succeed())

	g.Eventually(func(g Gomega) {
		c := &fleet.Cluster{}
		g.Expect(env.Get(ctx, clusterKey, c)).To(Succeed())
		g.Expect(c.Spec.ClientID).To(Equal(string(kubeSystem.UID)), "the identity of the manager's own cluster")
		cond := conditions.Get(c, fleet.ConditionImported)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(fleet.ReasonApplied), cond.Message)
	}).WithTimeout(timeout).Should(Succeed(), "the local Cluster's agent applied")

	// What the install wrote, in the manager's own cluster, is what an
	// agent registers from: an import token of fleet-local, and the
	// manager's address taken from the local Secret.
	g.Expect(env.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}, &appsv1.Deployment{})).To(Succeed())
	raw := &corev1.Secret{}
	g.Expect(env.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentBootstrapSecretName}, raw)).To(Succeed())
	boot, err := agentinstall.ReadBootstrap(raw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(boot.ClusterNamespace).To(Equal("fleet-local"))
	g.Expect(boot.APIServerURL).To(Equal(env.Config.Host))
	cm := &corev1.ConfigMap{}
	g.Expect(env.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}, cm)).To(Succeed())
	cfg, err := agentinstall.ReadConfig(cm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Labels).To(HaveKeyWithValue("name", "local"))
}

// The manager's own connection serves only the Cluster local: another
// Cluster naming the same Secret finds no kubeconfig in it.
func TestOnlyTheLocalClusterIsInstalledWithTheManagersConnection(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	other := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-local", Name: "impostor"},
		Spec: fleet.ClusterSpec{KubeConfigSecret: "local-cluster"}}
	g.Expect(env.Create(ctx, other)).To(Succeed())
	t.Cleanup(func() { _ = env.Delete(context.Background(), other) })
	g.Eventually(func(g Gomega) {
		c := &fleet.Cluster{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(other), c)).To(Succeed())
		cond := conditions.Get(c, fleet.ConditionImported)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(fleet.ReasonKubeconfigInvalid))
	}).WithTimeout(timeout).Should(Succeed())
}

func TestDeletedLocalObjectsComeBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  types.NamespacedName
		obj  func() client.Object
	}{
		{"the Secret", secretKey, func() client.Object { return &corev1.Secret{} }},
		{"the ClusterGroup", groupKey, func() client.Object { return &fleet.ClusterGroup{} }},
		// Last: its finalizer (the cluster controller's) holds it a while.
		{"the Cluster", clusterKey, func() client.Object { return &fleet.Cluster{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			old := tc.obj()
			g.Eventually(func() error { return env.Get(ctx, tc.key, old) }).WithTimeout(timeout).Should(Succeed())
			g.Expect(env.Delete(ctx, old)).To(Succeed())
			g.Eventually(func(g Gomega) {
				now := tc.obj()
				err := env.Get(ctx, tc.key, now)
				g.Expect(apierrors.IsNotFound(err)).To(BeFalse(), "%v", err)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(now.GetUID()).NotTo(Equal(old.GetUID()), "a new %s", tc.name)
				g.Expect(now.GetDeletionTimestamp()).To(BeNil())
			}).WithTimeout(timeout).Should(Succeed(), "%s made again", tc.name)
		})
	}
}
