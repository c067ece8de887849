package agentupgrade

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/framework"
)

// Kubelet plays the kubelet of one downstream cluster for the agent's pods:
// the cluster runs kube-controller-manager (Deployments, ReplicaSets) but no
// node, so the agent's pods stay unbound, and Kubelet runs each of them as
// a fleet-agent process, with the binary its image names (Binaries), the
// pod's arguments and literal environment, and the cluster's kubeconfig.
// It reports a pod Running and Ready while its process runs, not Ready once
// it exited, and waiting in ErrImagePull when no binary answers to its
// image; a pod that is gone has its process stopped (SIGTERM: the agent
// gives its leader lease back). Deployment availability so reflects the
// agent processes, as a real kubelet would make it.
type Kubelet struct {
	// Cluster names the cluster in logs.
	Cluster string
	// Client is an admin client of the downstream cluster, and Kubeconfig
	// the file the agents get as --kubeconfig.
	Client     client.Client
	Kubeconfig string
	// Namespace is where the agent's pods are.
	Namespace string
	// Binaries maps an image to the fleet-agent binary it stands for.
	Binaries map[string]string
	// LogDir receives one log per agent process.
	LogDir string

	mu      sync.Mutex
	pods    map[types.UID]*podProcess
	started int
}

// podProcess is what runs for one pod.
type podProcess struct {
	pod   string
	image string
	proc  *framework.Process // nil: no binary for the image
	ready bool
}

// Running is one agent process of a cluster as the Kubelet sees it.
type Running struct {
	Pod, Image string
	Process    *framework.Process
}

// Run syncs pods and processes every interval until ctx ends, then stops
// every process.
func (k *Kubelet) Run(ctx context.Context, interval time.Duration) {
	k.mu.Lock()
	k.pods = map[types.UID]*podProcess{}
	k.mu.Unlock()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		k.sync(ctx)
		select {
		case <-ctx.Done():
			k.stopAll()
			return
		case <-t.C:
		}
	}
}

// Processes returns the agent processes running now.
func (k *Kubelet) Processes() []Running {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []Running
	for _, p := range k.pods {
		if p.proc != nil && !p.proc.Exited() {
			out = append(out, Running{Pod: p.pod, Image: p.image, Process: p.proc})
		}
	}
	return out
}

func (k *Kubelet) sync(ctx context.Context) {
	pods := &corev1.PodList{}
	if err := k.Client.List(ctx, pods, client.InNamespace(k.Namespace), client.MatchingLabels{"app": fleet.AgentName}); err != nil {
		return // the next tick tries again
	}
	seen := map[types.UID]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		seen[pod.UID] = true
		k.mu.Lock()
		p := k.pods[pod.UID]
		k.mu.Unlock()
		switch {
		case p == nil:
			p = k.start(pod)
			k.mu.Lock()
			k.pods[pod.UID] = p
			k.mu.Unlock()
			k.report(ctx, pod, p)
		case p.ready && p.proc.Exited():
			p.ready = false
			k.report(ctx, pod, p)
		case !podReported(pod, p):
			// A status write that failed, or was overwritten, is written again.
			k.report(ctx, pod, p)
		}
	}
	k.mu.Lock()
	var gone []*podProcess
	for uid, p := range k.pods {
		if !seen[uid] {
			gone = append(gone, p)
			delete(k.pods, uid)
		}
	}
	k.mu.Unlock()
	for _, p := range gone {
		if p.proc != nil {
			go p.proc.Stop()
		}
	}
}

// start runs the pod's agent, when a binary answers to its image.
func (k *Kubelet) start(pod *corev1.Pod) *podProcess {
	c := pod.Spec.Containers[0]
	p := &podProcess{pod: pod.Name, image: c.Image}
	bin, ok := k.Binaries[c.Image]
	if !ok {
		return p
	}
	env := []string{}
	vars := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			v = pod.Namespace
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	args := []string{"--kubeconfig", k.Kubeconfig}
	for _, a := range c.Args {
		for name, v := range vars {
			a = strings.ReplaceAll(a, "$("+name+")", v)
		}
		args = append(args, a)
	}
	k.mu.Lock()
	k.started++
	n := k.started
	k.mu.Unlock()
	proc, err := framework.StartFile(k.LogDir, fmt.Sprintf("agent-%s-%d", k.Cluster, n), bin, env, args...)
	if err != nil {
		return p
	}
	p.proc, p.ready = proc, true
	return p
}

// podReported tells whether the pod's status says what the process is.
func podReported(pod *corev1.Pod, p *podProcess) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return (c.Status == corev1.ConditionTrue) == p.ready
		}
	}
	return false
}

// report writes the pod's status as a kubelet would.
func (k *Kubelet) report(ctx context.Context, pod *corev1.Pod, p *podProcess) {
	now := metav1.Now()
	before := pod.DeepCopy()
	st := corev1.ContainerStatus{Name: pod.Spec.Containers[0].Name, Image: p.image, Ready: p.ready}
	cond := corev1.ConditionFalse
	switch {
	case p.proc == nil:
		pod.Status.Phase = corev1.PodPending
		st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "no fleet-agent binary stands for image " + p.image}
	case p.ready:
		pod.Status.Phase = corev1.PodRunning
		st.Started = ptr.To(true)
		st.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
		cond = corev1.ConditionTrue
	default:
		pod.Status.Phase = corev1.PodRunning
		st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: now}
	}
	pod.Status.StartTime = &now
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{st}
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: cond, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: cond, LastTransitionTime: now},
	}
	// A failed write is retried on the next tick (podReported).
	_ = k.Client.Status().Patch(ctx, pod, client.MergeFrom(before))
}

func (k *Kubelet) stopAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range k.pods {
		if p.proc != nil {
			wg.Add(1)
			go func() { defer wg.Done(); p.proc.Stop() }()
		}
	}
	wg.Wait()
}
