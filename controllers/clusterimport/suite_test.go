package clusterimport_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/clusterimport"
	"github.com/gitfleet/fleet/controllers/clusterregistrationtoken"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/envtest"
)

var (
	// env is the manager's cluster, where the import controller runs.
	env *envtest.Environment
	// workload is a second control plane: the downstream cluster that a
	// kubeconfig Secret points at and the agent is installed into.
	workload *controlplane.ControlPlane
	// importer is the manager's import controller: a test may run a copy
	// of it by hand.
	importer *clusterimport.Reconciler
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	workload, err = controlplane.Start(controlplane.Options{Name: "import-workload", NoCRDs: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the workload cluster: %v\n", err)
		return 1
	}
	defer func() { _ = workload.Stop() }()
	return envtest.Run(context.Background(), envtest.RunInput{
		M:    m,
		Name: "clusterimport",
		// Tokens' ServiceAccounts live there.
		Namespaces: []string{names.SystemRegistrationNamespace(fleet.DefaultSystemNamespace)},
		SetupReconcilers: func(ctx context.Context, mgr ctrl.Manager) error {
			// The registration controller owns the clientID index; the import
			// controller only reads it.
			for _, obj := range []client.Object{&fleet.Cluster{}, &fleet.ClusterRegistration{}} {
				if err := mgr.GetFieldIndexer().IndexField(ctx, obj, fleet.ClientIDIndex, clientID); err != nil {
					return err
				}
			}
			// Installs hand the agent an import token, which the token
			// controller issues.
			token := &clusterregistrationtoken.Reconciler{Client: mgr.GetClient(), APIServerURL: "https://manager.example",
				SystemRegistrationNamespace: names.SystemRegistrationNamespace(fleet.DefaultSystemNamespace)}
			if err := token.SetupWithManager(mgr); err != nil {
				return err
			}
			// A short check interval lets a test see a deleted agent come back.
			importer = &clusterimport.Reconciler{Client: mgr.GetClient(), APIServerURL: "https://manager.example",
				RemoteTimeout: 5 * time.Second, CheckInterval: 2 * time.Second}
			return importer.SetupWithManager(ctx, mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	})
}

func clientID(o client.Object) []string {
	var id string
	switch o := o.(type) {
	case *fleet.Cluster:
		id = o.Spec.ClientID
	case *fleet.ClusterRegistration:
		id = o.Spec.ClientID
	}
	if id == "" {
		return nil
	}
	return []string{id}
}

// kubeconfigSecret is a kubeconfig Secret named name holding data under the
// "value" key (nil data: an admin kubeconfig of the workload cluster).
func kubeconfigSecret(t *testing.T, namespace, name string, data []byte) *corev1.Secret {
	t.Helper()
	if data == nil {
		var err error
		data, err = kubeconfig.FromREST(workload.Config, "workload")
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data: map[string][]byte{fleet.KubeConfigSecretValueKey: data}}
}

// tokenKubeconfig is a kubeconfig of the workload cluster that
// authenticates with token.
func tokenKubeconfig(token string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: w, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: w, context: {cluster: w, user: u}}]
current-context: w
`, workload.Config.Host, base64.StdEncoding.EncodeToString(workload.Config.CAData), token)
}

func importCluster(namespace, name, secret string) *fleet.Cluster {
	return &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: fleet.ClusterSpec{KubeConfigSecret: secret}}
}

// imported returns the Cluster's Imported condition as the API server has
// it (nil when there is none yet).
func imported(ctx context.Context, c *fleet.Cluster) func(g Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		got := &fleet.Cluster{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		return conditions.Get(got, fleet.ConditionImported)
	}
}

func haveReason(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(Not(BeNil()), HaveField("Status", status), HaveField("Reason", reason))
}

func TestImportInstallsTheAgentDownstream(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "import")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Create(ctx, kubeconfigSecret(t, ns.Name, "workload-kubeconfig", nil))).To(Succeed())
	cluster := importCluster(ns.Name, "workload", "workload-kubeconfig")
	g.Expect(env.CreateAndWait(ctx, cluster)).To(Succeed())
	// Another writer of the Cluster's status (the cluster controller) owns
	// its own condition.
	processed := metav1.Condition{Type: fleet.ConditionProcessed, Status: metav1.ConditionTrue, Reason: fleet.ReasonProcessed,
		Message: "set by another writer", LastTransitionTime: metav1.Now()}
	g.Expect(conditions.ApplyStatus(ctx, env.Client, fleet.GroupVersion.WithKind("Cluster"), client.ObjectKeyFromObject(cluster),
		map[string]any{"conditions": []metav1.Condition{processed}}, "another-writer")).To(Succeed())

	g.Eventually(imported(ctx, cluster)).WithTimeout(30*time.Second).
		Should(haveReason(metav1.ConditionTrue, fleet.ReasonApplied), "the agent's objects applied downstream")

	downstream, err := workload.Client(nil)
	g.Expect(err).NotTo(HaveOccurred())
	dep := &appsv1.Deployment{}
	g.Expect(downstream.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}, dep)).To(Succeed())
	g.Expect(dep.Annotations).To(HaveKey(clusterimport.SettingsHashAnnotation), "the record of the install")
	g.Expect(dep.Spec.Template.Annotations).To(HaveKey(clusterimport.RestartedAtAnnotation))
	boot := &corev1.Secret{}
	g.Expect(downstream.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentBootstrapSecretName}, boot)).
		To(Succeed(), "the agent gets a token to register with")
	g.Expect(downstream.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}, &corev1.ConfigMap{})).To(Succeed())

	got := &fleet.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(cluster), got)).To(Succeed())
	uid, err := workload.KubeSystemUID(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Spec.ClientID).To(Equal(string(uid)), "the identity is the workload's kube-system UID")
	g.Expect(got.Status.AgentDeployedGeneration).NotTo(BeNil())
	g.Expect(got.Status.APIServerURL).To(Equal("https://manager.example"))
	g.Expect(env.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: names.ImportToken(cluster.Name)}, &fleet.ClusterRegistrationToken{})).
		To(Succeed(), "the import token stays until the agent registers")

	g.Expect(conditions.Get(got, fleet.ConditionProcessed)).To(HaveField("Message", "set by another writer"),
		"the import controller applies only its own fields")

	// Each imported cluster is looked at again: a deleted agent comes back,
	// with a new restart stamp.
	g.Expect(downstream.Delete(ctx, dep)).To(Succeed())
	g.Eventually(func(g Gomega) {
		again := &appsv1.Deployment{}
		g.Expect(downstream.Get(ctx, client.ObjectKeyFromObject(dep), again)).To(Succeed())
		g.Expect(again.UID).NotTo(Equal(dep.UID))
	}).WithTimeout(20*time.Second).Should(Succeed(), "the agent Deployment reinstalled at the next check")
}

func TestMissingKubeconfigSecretStallsUntilTheSecretIsFixed(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "import-missing")
	g.Expect(err).NotTo(HaveOccurred())
	cluster := importCluster(ns.Name, "nowhere", "nowhere-kubeconfig")
	g.Expect(env.CreateAndWait(ctx, cluster)).To(Succeed())

	g.Eventually(imported(ctx, cluster)).WithTimeout(20*time.Second).Should(And(
		haveReason(metav1.ConditionFalse, fleet.ReasonSecretNotFound),
		HaveField("Message", ContainSubstring(fmt.Sprintf("kubeconfig Secret %s/nowhere-kubeconfig not found", ns.Name)))),
		"the Cluster says which Secret to create")
	g.Eventually(func(g Gomega) []eventsv1.Event {
		list := &eventsv1.EventList{}
		g.Expect(env.List(ctx, list, client.InNamespace(ns.Name))).To(Succeed())
		return list.Items
	}).WithTimeout(20*time.Second).Should(ContainElement(And(
		HaveField("Reason", fleet.ReasonSecretNotFound), HaveField("Type", corev1.EventTypeWarning),
		HaveField("Regarding.Name", cluster.Name))), "a Warning event about the Cluster")

	// The stall waits for a person; the Secret watch brings the fix in. This
	// Secret is still wrong: it has no "value" key.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "nowhere-kubeconfig"},
		Data: map[string][]byte{"kubeconfig": []byte("x")}}
	g.Expect(env.Create(ctx, secret)).To(Succeed())
	g.Eventually(imported(ctx, cluster)).WithTimeout(20*time.Second).Should(And(
		haveReason(metav1.ConditionFalse, fleet.ReasonKubeconfigInvalid),
		HaveField("Message", ContainSubstring(`has no key "value"`))), "the Secret's creation is acted on")
}

func TestRejectedTokenIsAnInvalidKubeconfig(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "import-token")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Create(ctx, kubeconfigSecret(t, ns.Name, "forged", tokenKubeconfig("forged-token")))).To(Succeed())
	cluster := importCluster(ns.Name, "forged", "forged")
	g.Expect(env.CreateAndWait(ctx, cluster)).To(Succeed())

	g.Eventually(imported(ctx, cluster)).WithTimeout(20 * time.Second).Should(And(
		haveReason(metav1.ConditionFalse, fleet.ReasonKubeconfigInvalid),
		HaveField("Message", ContainSubstring("the cluster rejected the kubeconfig's credentials (Unauthorized)"))))
	got := &fleet.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(cluster), got)).To(Succeed())
	g.Expect(got.Spec.ClientID).To(BeEmpty(), "nothing learnt from a cluster that refused us")
	g.Expect(got.Status.AgentDeployedGeneration).To(BeNil(), "nothing installed")
}
