package workloads

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// stalledRollout: a new image that cannot be pulled stalls the rollout of
// a one-replica Deployment: its new ReplicaSet's pod cannot start, the old
// pod keeps serving, so Kubernetes counts the replica updated and the
// Deployment Available, yet the release is not Ready (an old replica is
// left), and once progressDeadlineSeconds has passed the reason is the
// deployment controller's ProgressDeadlineExceeded.
func stalledRollout(f *fixture) {
	c := f.clusters[0]
	const ns = "stall"
	f.newBundle("stall", fleet.BundleSpec{
		BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, CreateNamespace: ptr.To(true)},
		Resources:               []fleet.BundleResource{res("web.yaml", deployment("web", "nginx:1.27", 1, "  progressDeadlineSeconds: 25\n"))},
		Targets:                 targetName(c.name),
	})
	c.waitState("stall", fleet.Ready, 90*time.Second)
	e2e.WaitFor("the Deployment's pod to run on a simulated node", func(g Gomega) {
		runningOnSimulatedNodes(g, c.pods(ns, "web"), 1)
	}, 30*time.Second, 250*time.Millisecond)

	bad := controlplane.FailImagePrefix + "web:2"
	f.setResource("stall", "web.yaml", deployment("web", bad, 1, "  progressDeadlineSeconds: 25\n"))
	e2e.WaitFor("a pod of the new ReplicaSet to wait in ImagePullBackOff", func(g Gomega) {
		var backoff int
		for _, p := range c.pods(ns, "web") {
			for _, s := range p.Status.ContainerStatuses {
				if s.Image == bad && s.State.Waiting != nil && s.State.Waiting.Reason == "ImagePullBackOff" {
					backoff++
				}
			}
		}
		g.Expect(backoff).To(BeNumerically(">=", 1))
	}, 60*time.Second, 250*time.Millisecond)
	// The old ReplicaSet still serves and the new one has its replica:
	// Kubernetes counts it updated and the Deployment Available, but the
	// rollout is not done.
	e2e.WaitFor("the deployment controller to count the new replica updated, the old one available", func(g Gomega) {
		d := c.deployment(ns, "web")
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(int32(1)), "%+v", d.Status)
		g.Expect(d.Status.AvailableReplicas).To(Equal(int32(1)), "%+v", d.Status)
		g.Expect(d.Status.Replicas).To(Equal(int32(2)), "%+v", d.Status)
	}, 30*time.Second, 250*time.Millisecond)
	// Before the deadline (25s from the rollout's start) the agent says why.
	e2e.WaitFor("the release to be NotReady with an old replica left", func(g Gomega) {
		bd := c.bd("stall")
		g.Expect(summary.State(bd)).To(Equal(fleet.NotReady))
		g.Expect(bd.Status.NonReadyStatus).To(ContainElement(And(HaveField("Summary.Message", ContainElement("1 old replicas pending termination")), HaveField("Summary.Transitioning", BeTrue()))), "%+v", bd.Status)
	}, 15*time.Second, 250*time.Millisecond)

	e2e.WaitFor("the release to be NotReady with ProgressDeadlineExceeded", func(g Gomega) {
		bd := c.bd("stall")
		g.Expect(summary.State(bd)).To(Equal(fleet.NotReady))
		g.Expect(bd.Status.NonReadyStatus).To(ContainElement(And(
			HaveField("Kind", "Deployment"), HaveField("Namespace", ns), HaveField("Name", "web"),
			HaveField("Summary.Message", ContainElement(ContainSubstring("ProgressDeadlineExceeded"))), HaveField("Summary.Error", BeTrue()))), "status: %+v", bd.Status)
	}, 90*time.Second, 500*time.Millisecond)
	e2e.WaitFor("the Bundle to be NotReady", func(g Gomega) {
		b := &fleet.Bundle{}
		g.Expect(f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: "stall"}, b)).To(Succeed())
		g.Expect(b.Status.Summary.NotReady).To(Equal(1), "summary %+v", b.Status.Summary)
	}, 30*time.Second, 250*time.Millisecond)

	// A good image rolls out and the release is Ready again.
	f.setResource("stall", "web.yaml", deployment("web", "nginx:1.28", 1, "  progressDeadlineSeconds: 25\n"))
	c.waitState("stall", fleet.Ready, 90*time.Second)
	d := c.deployment(ns, "web")
	Expect(rolling(d)).To(BeFalse(), "Ready only once the rollout is done: %+v", d.Status)
}

// maxUnavailable: with rolloutStrategy.maxUnavailable 1, the manager moves
// one cluster to the new deploymentID and waits until its agent reports it
// Ready, which it does only once the deployment controller has rolled the
// Deployment out; minReadySeconds makes each rollout last. At no moment
// are the Deployments of both clusters rolling, nor both clusters
// unavailable.
func maxUnavailable(f *fixture) {
	const ns = "roll"
	web := func(image string) string { return deployment("web", image, 2, "  minReadySeconds: 4\n") }
	one := intstr.FromInt32(1)
	f.newBundle("roll", fleet.BundleSpec{
		BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, CreateNamespace: ptr.To(true)},
		Resources:               []fleet.BundleResource{res("web.yaml", web("nginx:1.27"))},
		Targets:                 targetAll(),
		RolloutStrategy:         &fleet.RolloutStrategy{MaxUnavailable: &one},
	})
	old := map[string]string{}
	for _, c := range f.clusters {
		old[c.name] = c.waitState("roll", fleet.Ready, 90*time.Second).Spec.DeploymentID
	}

	f.setResource("roll", "web.yaml", web("nginx:1.28"))
	start := time.Now()
	oneAtATime := false
	moved := map[string]time.Duration{}
	e2e.WaitFor("both clusters to roll out the new image, one at a time", func(g Gomega) {
		updated, rollingNow, notReady := 0, 0, 0
		states := make([]string, 0, len(f.clusters))
		for _, c := range f.clusters {
			bd := c.bd("roll")
			d := c.deployment(ns, "web")
			if bd.Spec.DeploymentID != old[c.name] {
				updated++
				if _, ok := moved[c.name]; !ok {
					moved[c.name] = time.Since(start)
				}
			}
			if rolling(d) {
				rollingNow++
			}
			// OutOfSync: the change is staged, the old release still
			// runs and is Ready; it counts as available, as in Fleet.
			if st := summary.State(bd); st != fleet.Ready && st != fleet.OutOfSync {
				notReady++
			}
			states = append(states, fmt.Sprintf("%s: %s, deployment %+v", c.name, summary.State(bd), d.Status))
		}
		if rollingNow > 1 || notReady > 1 {
			StopTrying(fmt.Sprintf("maxUnavailable 1 broken: %d Deployments rolling, %d clusters not Ready at once: %v",
				rollingNow, notReady, states)).Now()
		}
		if updated == 1 && notReady == 1 {
			oneAtATime = true
		}
		g.Expect(updated).To(Equal(2), "%v", states)
		g.Expect(notReady).To(Equal(0), "%v", states)
	}, 3*time.Minute, 100*time.Millisecond)
	Expect(oneAtATime).To(BeTrue(), "one cluster was seen rolling while the other waited with the old deploymentID")
	GinkgoWriter.Printf("deploymentID moved on: %v\n", moved)
	for _, c := range f.clusters {
		Expect(c.deployment(ns, "web").Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:1.28"))
	}
}

// migrateChart is a chart whose only object is a Job running image.
func migrateChart(image string) []fleet.BundleResource {
	return []fleet.BundleResource{
		res("Chart.yaml", "apiVersion: v2\nname: migrate\nversion: 0.1.0\n"),
		res("values.yaml", "image: "+image+"\n"),
		res("templates/job.yaml", `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate-{{ .Release.Revision }}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: {{ .Values.image }}
`),
	}
}

// failingJob: with waitForJobs, Helm waits for the release's Job; the Job
// controller marks it Failed once its pod fails (backoffLimit 0), and the
// install fails with that: Helm retries a failed readiness check for about
// a minute (30 checks 2s apart) before it gives up, so the timeout leaves it
// that minute. The BundleDeployment says ErrApplied with Helm's reason. A
// good image in the next revision deploys.
func failingJob(f *fixture) {
	c := f.clusters[0]
	const ns = "jobs"
	f.newBundle("jobs", fleet.BundleSpec{
		BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, CreateNamespace: ptr.To(true),
			Helm: &fleet.HelmOptions{ReleaseName: "migrate", WaitForJobs: true, TimeoutSeconds: 150}},
		Resources: migrateChart(controlplane.FailImagePrefix + "migrate:1"),
		Targets:   targetName(c.name),
	})
	e2e.WaitFor("the Job controller to mark Job migrate-1 Failed", func(g Gomega) {
		job := &batchv1.Job{}
		g.Expect(c.Local.Get(f.ctx, types.NamespacedName{Namespace: ns, Name: "migrate-1"}, job)).To(Succeed())
		g.Expect(job.Status.Conditions).To(ContainElement(And(
			HaveField("Type", batchv1.JobFailed), HaveField("Status", corev1.ConditionTrue))), "job status %+v", job.Status)
	}, 90*time.Second, 250*time.Millisecond)
	bd := c.waitState("jobs", fleet.ErrApplied, 150*time.Second)
	Expect(summary.Message(bd)).To(And(ContainSubstring("migrate-1"), ContainSubstring("failed")), "status: %+v", bd.Status)
	Expect(bd.Status.AppliedDeploymentID).NotTo(Equal(bd.Spec.DeploymentID))

	f.updateBundle("jobs", func(b *fleet.Bundle) { b.Spec.Resources = migrateChart("busybox:1.36") })
	e2e.WaitFor("the release to deploy once its Job completes", func(g Gomega) {
		bd := c.bd("jobs")
		g.Expect(summary.State(bd)).To(Equal(fleet.Ready), "%s; status %+v", summary.Message(bd), bd.Status)
		g.Expect(bd.Status.Release).To(HavePrefix(ns + "/migrate:"))
	}, 2*time.Minute, 500*time.Millisecond)
	jobs := &batchv1.JobList{}
	Expect(c.Local.List(f.ctx, jobs, client.InNamespace(ns))).To(Succeed())
	var complete []string
	for _, j := range jobs.Items {
		for _, cond := range j.Status.Conditions {
			if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
				complete = append(complete, j.Name)
			}
		}
	}
	Expect(complete).To(HaveLen(1), "the new revision's Job completed: %+v", jobs.Items)
}

// deletedPod: a pod is not part of the release; deleting one makes its
// ReplicaSet create another, and the release is neither Modified meanwhile
// nor redeployed.
func deletedPod(f *fixture) {
	c := f.clusters[1]
	const ns = "pods"
	f.newBundle("pods", fleet.BundleSpec{
		BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, CreateNamespace: ptr.To(true)},
		Resources:               []fleet.BundleResource{res("web.yaml", deployment("web", "nginx:1.27", 1))},
		Targets:                 targetName(c.name),
	})
	before := c.waitState("pods", fleet.Ready, 90*time.Second)
	var victim corev1.Pod
	e2e.WaitFor("the Deployment's pod to run", func(g Gomega) {
		pods := c.pods(ns, "web")
		runningOnSimulatedNodes(g, pods, 1)
		victim = pods[0]
	}, 30*time.Second, 250*time.Millisecond)
	generation := c.deployment(ns, "web").Generation

	Expect(c.Local.Delete(f.ctx, &victim)).To(Succeed())
	e2e.WaitFor("the ReplicaSet to replace the deleted pod, and the release to stay unmodified", func(g Gomega) {
		bd := c.bd("pods")
		if !bd.Status.NonModified || len(bd.Status.ModifiedStatus) > 0 {
			StopTrying(fmt.Sprintf("a deleted pod was taken for drift: %+v", bd.Status.ModifiedStatus)).Now()
		}
		pods := c.pods(ns, "web")
		runningOnSimulatedNodes(g, pods, 1)
		g.Expect(pods[0].UID).NotTo(Equal(victim.UID))
		g.Expect(summary.State(bd)).To(Equal(fleet.Ready))
	}, 60*time.Second, 100*time.Millisecond)
	// While the ReplicaSet replaces the pod, the Deployment may for a moment
	// count no updated replica, and the agent may report that NotReady when
	// its cache catches up: readiness may dip, drift must never show.
	e2e.HoldsFor("the release stays unmodified", func(g Gomega) {
		bd := c.bd("pods")
		g.Expect(bd.Status.NonModified).To(BeTrue(), "%+v", bd.Status)
		g.Expect(bd.Status.ModifiedStatus).To(BeEmpty())
	}, 5*time.Second, 250*time.Millisecond)
	after := c.waitState("pods", fleet.Ready, 60*time.Second)
	Expect(after.Status.Release).To(Equal(before.Status.Release), "no new revision")
	Expect(c.deployment(ns, "web").Generation).To(Equal(generation), "the Deployment was not rewritten")
}

// serviceAccounts: the controller manager runs each controller with its
// own ServiceAccount's token, publishes the API server's CA to every
// namespace, and the tokens it and the API server issue are accepted: a
// client holding only a ServiceAccount's token is authenticated as that
// ServiceAccount (and refused what it has no right to).
func serviceAccounts(f *fixture) {
	c := f.clusters[0]
	for _, sa := range []string{"deployment-controller", "replicaset-controller", "job-controller", "generic-garbage-collector"} {
		Expect(c.Local.Get(f.ctx, types.NamespacedName{Namespace: "kube-system", Name: sa}, &corev1.ServiceAccount{})).
			To(Succeed(), "the controller manager made ServiceAccount kube-system/%s for its controller", sa)
	}
	root := &corev1.ConfigMap{}
	Expect(c.Local.Get(f.ctx, types.NamespacedName{Namespace: "default", Name: "kube-root-ca.crt"}, root)).To(Succeed())
	Expect(root.Data["ca.crt"]).To(Equal(string(c.cp.Config.CAData)), "--root-ca-file is the API server's CA")

	// A token the API server issues (what the controller manager asks for
	// each controller), and one the controller manager's token controller
	// signs into a Secret with --service-account-private-key-file.
	tr := &authenticationv1.TokenRequest{}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "default"}}
	Expect(c.Local.SubResource("token").Create(f.ctx, sa, tr)).To(Succeed())
	authenticatedAs(f, c, tr.Status.Token, "system:serviceaccount:default:default")

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "default-token",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}
	Expect(c.Local.Create(f.ctx, secret)).To(Succeed())
	e2e.WaitFor("the token controller to sign a token into Secret default/default-token", func(g Gomega) {
		g.Expect(c.Local.Get(f.ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		g.Expect(secret.Data).To(HaveKey(corev1.ServiceAccountTokenKey))
	}, 30*time.Second, 250*time.Millisecond)
	// The API server checks such a token against the Secret as its own
	// informer holds it, which may still be the version without the token
	// for a moment after the token controller wrote it: until then the token
	// is turned away (401), then accepted.
	e2e.WaitFor("the API server to authenticate the token the token controller signed", func(g Gomega) {
		authenticatedAsG(g, f, c, string(secret.Data[corev1.ServiceAccountTokenKey]), "system:serviceaccount:default:default")
	}, 30*time.Second, 250*time.Millisecond)
}

// authenticatedAs checks that a client holding only token is authenticated
// by c's API server as user: refused (403) what the user may not do, not
// turned away (401).
func authenticatedAs(f *fixture, c *cluster, token, user string) {
	GinkgoHelper()
	authenticatedAsG(Default, f, c, token, user)
}

func authenticatedAsG(g Gomega, f *fixture, c *cluster, token, user string) {
	cfg := &rest.Config{Host: c.cp.Config.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.cp.Config.CAData}}
	asSA, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	err = asSA.List(f.ctx, &corev1.SecretList{}, client.InNamespace("kube-system"))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "authenticated as %s, not authorized: %v", user, err)
	g.Expect(err.Error()).To(ContainSubstring(user))
}
