package clusterimport_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// A cluster registered by token in one namespace and then imported (as
// Cluster API enrolment does) in another stays one Fleet Cluster: the import
// installs nothing while the agent downstream is registered as the other
// Cluster, says which, and goes on by itself once that Cluster is deleted.
// A third namespace's Cluster that merely copies the clientID holds nothing.
func TestImportOfAClusterRegisteredInAnotherNamespaceIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	// Its own agent namespace downstream: other tests import the same
	// workload cluster into fleet-system.
	const agentNS = "fleet-elsewhere"
	uid, err := workload.KubeSystemUID(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	downstream, err := workload.Client(nil)
	g.Expect(err).NotTo(HaveOccurred())

	// The cluster registered by token in the first namespace: its Cluster
	// and, downstream, the credential its agent stored.
	tokenNS, err := env.CreateNamespace(ctx, "elsewhere-token")
	g.Expect(err).NotTo(HaveOccurred())
	edge := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: tokenNS.Name, Name: "edge"}, Spec: fleet.ClusterSpec{ClientID: string(uid)}}
	g.Expect(env.CreateAndWait(ctx, edge)).To(Succeed())
	g.Expect(downstream.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}})).To(Succeed())
	stored := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: fleet.AgentName}, Data: map[string][]byte{
		"apiServerURL": []byte("https://manager.example"), "token": []byte("the agent's credential"),
		"namespace": []byte(tokenNS.Name), "clusterName": []byte("edge"), "clusterNamespace": []byte("cluster-x"), "clientID": []byte(uid),
	}}
	g.Expect(downstream.Create(ctx, stored)).To(Succeed())
	t.Cleanup(func() {
		_ = downstream.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}})
	})

	// A tenant of a third namespace copies the clientID, which anyone who
	// reads Clusters knows.
	squatNS, err := env.CreateNamespace(ctx, "elsewhere-squat")
	g.Expect(err).NotTo(HaveOccurred())
	squat := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: squatNS.Name, Name: "squat"}, Spec: fleet.ClusterSpec{ClientID: string(uid)}}
	g.Expect(env.CreateAndWait(ctx, squat)).To(Succeed())

	// The import in another namespace.
	capiNS, err := env.CreateNamespace(ctx, "elsewhere-capi")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Create(ctx, kubeconfigSecret(t, capiNS.Name, "workload-kubeconfig", nil))).To(Succeed())
	cluster := importCluster(capiNS.Name, "workload", "workload-kubeconfig")
	cluster.Spec.AgentNamespace = agentNS
	g.Expect(env.CreateAndWait(ctx, cluster)).To(Succeed())

	g.Eventually(imported(ctx, cluster)).WithTimeout(30*time.Second).Should(And(
		haveReason(metav1.ConditionFalse, fleet.ReasonIdentityConflict),
		HaveField("Message", ContainSubstring("is already Fleet Cluster "+tokenNS.Name+"/edge")),
		HaveField("Message", ContainSubstring("delete Cluster "+tokenNS.Name+"/edge"))),
		"the Cluster names the one that holds the downstream cluster")
	// Looked at again (every CheckInterval, 2s here) and still refused:
	// nothing is installed, no token handed out, the agent's credential
	// untouched.
	deployment := types.NamespacedName{Namespace: agentNS, Name: fleet.AgentName}
	g.Consistently(func(g Gomega) {
		err := downstream.Get(ctx, deployment, &appsv1.Deployment{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no second agent: %v", err)
		err = downstream.Get(ctx, types.NamespacedName{Namespace: agentNS, Name: fleet.AgentBootstrapSecretName}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no token of this namespace handed to the agent: %v", err)
		g.Expect(imported(ctx, cluster)(g)).To(haveReason(metav1.ConditionFalse, fleet.ReasonIdentityConflict))
	}).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	got := &corev1.Secret{}
	g.Expect(downstream.Get(ctx, client.ObjectKeyFromObject(stored), got)).To(Succeed())
	g.Expect(got.ResourceVersion).To(Equal(stored.ResourceVersion), "the agent's credential is untouched")
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(edge), &fleet.Cluster{})).To(Succeed(), "the token Cluster stays")

	// The admin moves the cluster on purpose: deleting the token Cluster
	// lets the import go on by itself; the squatter's copied clientID does
	// not stop it.
	g.Expect(env.Delete(ctx, edge)).To(Succeed())
	g.Eventually(imported(ctx, cluster)).WithTimeout(30*time.Second).
		Should(haveReason(metav1.ConditionTrue, fleet.ReasonApplied), "installed once the other Cluster is gone")
	g.Expect(downstream.Get(ctx, deployment, &appsv1.Deployment{})).To(Succeed())
}
