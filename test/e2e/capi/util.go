package capi

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

// env is what the helpers of the specs use; its fields are set from the
// SpecInput once the getter can be called.
type env struct {
	ctx       context.Context
	admin     client.WithWatch
	upstream  *controlplane.ControlPlane
	workloads []*controlplane.ControlPlane
	logDir    string
	kubelets  []*kubelet
}

func (e *env) set(in SpecInput) {
	e.admin, e.upstream, e.workloads, e.logDir = in.Admin, in.Upstream, in.Workloads, in.LogDir
}

// capiCluster is the spec of a Cluster API Cluster the test creates.
type capiCluster struct {
	name, namespace string
	labels          map[string]string
	annotations     map[string]string
	class           string
	paused          bool
	// workload the endpoint points at (only informational for Cluster API).
	workload *controlplane.ControlPlane
}

func (e *env) createCAPICluster(in capiCluster) *clusterv1.Cluster {
	GinkgoHelper()
	if in.namespace == "" {
		in.namespace = ns
	}
	u, err := url.Parse(in.workload.Config.Host)
	Expect(err).NotTo(HaveOccurred())
	host, portStr, _ := net.SplitHostPort(u.Host)
	port, _ := strconv.Atoi(portStr)
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: in.name, Namespace: in.namespace, Labels: in.labels, Annotations: in.annotations},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: host, Port: int32(port)},
		},
	}
	if in.paused {
		c.Spec.Paused = ptr.To(true)
	}
	if in.class != "" {
		c.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: in.class}, Version: "v1.36.0"}
	}
	Expect(e.admin.Create(e.ctx, c)).To(Succeed())
	return c
}

// initialize marks the control plane initialized, as Cluster API's
// controllers would.
func (e *env) initialize(c *clusterv1.Cluster) {
	GinkgoHelper()
	patch := []byte(`{"status":{"initialization":{"controlPlaneInitialized":true}}}`)
	Expect(e.admin.Status().Patch(e.ctx, c, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

// writeKubeconfigSecret writes <name>-kubeconfig as Cluster API does, with
// value as its kubeconfig (nil: an admin kubeconfig of the workload).
func (e *env) writeKubeconfigSecret(namespace, name string, workload *controlplane.ControlPlane, value []byte) {
	GinkgoHelper()
	if value == nil {
		var err error
		value, err = kubeconfig.FromREST(workload.Config, name)
		Expect(err).NotTo(HaveOccurred())
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: capi.KubeconfigSecretName(name), Namespace: namespace,
			Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{fleet.KubeConfigSecretValueKey: value},
	}
	Expect(e.admin.Create(e.ctx, s)).To(Succeed())
}

func (e *env) getFleetCluster(namespace, name string) (*fleet.Cluster, error) {
	c := &fleet.Cluster{}
	return c, e.admin.Get(e.ctx, types.NamespacedName{Namespace: namespace, Name: name}, c)
}

// imported returns the Imported reason of a fleet Cluster, "" when unknown.
func (e *env) imported(namespace, name string) func() string {
	return func() string {
		c, err := e.getFleetCluster(namespace, name)
		if err != nil {
			return ""
		}
		if cond := meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionImported); cond != nil {
			return cond.Reason
		}
		return ""
	}
}

func (e *env) importedCondition(namespace, name string) *metav1.Condition {
	c, err := e.getFleetCluster(namespace, name)
	if err != nil {
		return nil
	}
	return meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionImported)
}

// agentReady returns FleetAgentReady of a Cluster API Cluster, or nil.
func (e *env) agentReady(namespace, name string) func() *metav1.Condition {
	return func() *metav1.Condition {
		c := &clusterv1.Cluster{}
		if err := e.admin.Get(e.ctx, types.NamespacedName{Namespace: namespace, Name: name}, c); err != nil {
			return nil
		}
		return meta.FindStatusCondition(c.Status.Conditions, capi.ConditionFleetAgentReady)
	}
}

func haveReason(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(Not(BeNil()), HaveField("Status", status), HaveField("Reason", reason))
}

func (e *env) notFound(obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(e.admin.Get(e.ctx, client.ObjectKeyFromObject(obj), obj))
	}
}

func (e *env) localClient(cp *controlplane.ControlPlane) client.Client {
	GinkgoHelper()
	c, err := cp.Client(kinds.Scheme())
	Expect(err).NotTo(HaveOccurred())
	return c
}

func (e *env) kubeSystemUID(cp *controlplane.ControlPlane) string {
	GinkgoHelper()
	uid, err := cp.KubeSystemUID(e.ctx)
	Expect(err).NotTo(HaveOccurred())
	return string(uid)
}

// clustersWithClientID counts the fleet Clusters of an identity, anywhere.
func (e *env) clustersWithClientID(id string) func() []string {
	return func() []string {
		list := &fleet.ClusterList{}
		Expect(e.admin.List(e.ctx, list)).To(Succeed())
		var out []string
		for _, c := range list.Items {
			if c.Spec.ClientID == id {
				out = append(out, c.Namespace+"/"+c.Name)
			}
		}
		return out
	}
}

// kubelet stands in for the workload cluster's kubelet for the agent
// Deployment in one namespace: it runs the fleet-agent binary from that
// Deployment (its --namespace=$(NAMESPACE) argument resolved as the
// downward API would), restarts it when the pod template changes, and stops
// it when the Deployment is deleted.
type kubelet struct {
	e         *env
	cp        *controlplane.ControlPlane
	local     client.Client
	namespace string

	mu       sync.Mutex
	proc     *framework.Process
	template string
	starts   int
	hung     bool
	// podShown: the agent's Pod object exists (see pod).
	podShown bool
	// Crash-loop backoff of an agent that exits by itself.
	exitedAt time.Time
	backoff  time.Duration
	done     chan struct{}
	stopped  chan struct{}
}

func (e *env) startKubelet(cp *controlplane.ControlPlane, namespace string) *kubelet {
	k := &kubelet{e: e, cp: cp, local: e.localClient(cp), namespace: namespace, done: make(chan struct{}), stopped: make(chan struct{})}
	e.kubelets = append(e.kubelets, k)
	go func() {
		defer GinkgoRecover()
		defer close(k.stopped)
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-k.done:
				return
			case <-tick.C:
				if err := k.sync(); err != nil {
					GinkgoWriter.Printf("kubelet %s/%s: %v\n", cp.Name, namespace, err)
				}
			}
		}
	}()
	return k
}

func (k *kubelet) sync() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	dep := &appsv1.Deployment{}
	err := k.local.Get(k.e.ctx, types.NamespacedName{Namespace: k.namespace, Name: fleet.AgentName}, dep)
	if apierrors.IsNotFound(err) {
		if k.proc != nil {
			k.proc.Stop()
			k.proc, k.template = nil, ""
		}
		// The pod goes once its process has ended, as a kubelet reports.
		if k.podShown {
			if err := client.IgnoreNotFound(k.local.Delete(k.e.ctx, k.pod(), client.GracePeriodSeconds(0))); err != nil {
				return err
			}
			k.podShown = false
		}
		return nil
	}
	if err != nil {
		return err
	}
	b, err := json.Marshal(dep.Spec.Template)
	if err != nil {
		return fmt.Errorf("encoding the pod template of Deployment %s/%s: %w", dep.Namespace, dep.Name, err)
	}
	tpl := string(b)
	running := k.proc != nil && !k.proc.Exited()
	if tpl == k.template && (running || k.hung) {
		return nil
	}
	if tpl == k.template && k.proc != nil {
		// Crashed: restart with backoff, as a kubelet does.
		if k.exitedAt.IsZero() {
			k.exitedAt = time.Now()
			GinkgoWriter.Printf("kubelet %s/%s: agent exited:\n%s\n", k.cp.Name, k.namespace, lastLines(k.proc.Output(), 20))
		}
		if time.Since(k.exitedAt) < k.backoff {
			return nil
		}
		k.backoff = min(max(2*k.backoff, time.Second), 10*time.Second)
	} else {
		k.backoff = 0
	}
	k.exitedAt = time.Time{}
	if k.proc != nil {
		k.proc.Stop()
	}
	namespace, err := podNamespace(dep)
	if err != nil {
		return err
	}
	k.proc, err = framework.Start(k.e.logDir, fmt.Sprintf("agent-%s-%s-%d", k.cp.Name, k.namespace, k.starts), "fleet-agent",
		"--kubeconfig", k.cp.Kubeconfig, "--namespace", namespace)
	if err != nil {
		return err
	}
	k.template, k.hung = tpl, false
	k.starts++
	if !k.podShown {
		if err := k.local.Create(k.e.ctx, k.pod()); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		k.podShown = true
	}
	return nil
}

// pod is the agent's pod as the API server shows it while the agent runs:
// what the manager waits on to know the agent has stopped.
func (k *kubelet) pod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: fleet.AgentName + "-0", Labels: map[string]string{"app": fleet.AgentName}},
		Spec: corev1.PodSpec{ServiceAccountName: fleet.AgentName, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "agent", Image: "fleet-agent"}}},
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// podNamespace resolves the agent's --namespace=$(NAMESPACE) argument.
func podNamespace(dep *appsv1.Deployment) (string, error) {
	c := dep.Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--namespace="); ok {
			for _, e := range c.Env {
				if v == "$("+e.Name+")" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
					return dep.Namespace, nil
				}
			}
			return v, nil
		}
	}
	return "", fmt.Errorf("deployment %s/%s: no --namespace argument", dep.Namespace, dep.Name)
}

// hang stops the agent as a hung pod would be: no heartbeats, and no
// restart until the pod template changes.
func (k *kubelet) hang() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.hung = true
	k.proc.Stop()
}

// Starts is how many times the kubelet started the agent.
func (k *kubelet) Starts() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.starts
}

// Output is the log of the running agent.
func (k *kubelet) Output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.proc == nil {
		return "(no agent running)"
	}
	return k.proc.Output()
}

func (k *kubelet) stop() {
	select {
	case <-k.done:
		return
	default:
	}
	close(k.done)
	<-k.stopped
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.proc != nil {
		k.proc.Stop()
	}
}

func (e *env) stopKubelets() {
	for _, k := range e.kubelets {
		k.stop()
	}
}

// durations summarises a set of measurements.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	if i > 0 {
		i--
	}
	return sorted[i]
}
