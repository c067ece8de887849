// Package e2e holds the Ginkgo and Gomega helpers that end-to-end specs
// share: joining a downstream cluster as a user would, and waits that name
// what they wait for. It is kept apart from test/framework, which the
// local development environment (fleet dev up) also uses, so that the CLI
// does not link the test libraries.
package e2e

import (
	"context"
	"fmt"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

// JoinInput says which downstream cluster joins which manager, and how.
type JoinInput struct {
	// Upstream is the manager's control plane: `fleet install agent-token`
	// creates the token there.
	Upstream *controlplane.ControlPlane
	// Downstream is the cluster that joins.
	Downstream *controlplane.ControlPlane
	// Admin is an admin client of the manager's cluster, to read the
	// Cluster the agent registered.
	Admin client.Client
	// LogDir receives the agents' logs.
	LogDir string
	// SystemNamespace is the agent's namespace downstream, passed to the CLI
	// and the agent; empty leaves their default (fleet-system).
	SystemNamespace string
	// ConfigArgs follow `fleet install agent-config` (labels, a client ID);
	// none means no agent config is applied.
	ConfigArgs []string
	// APIServerURL, when set, replaces the manager's URL in the applied
	// token: the agent reaches the manager through it (a Proxy's URL).
	APIServerURL string
	// AgentArgs are the agent's flags besides --kubeconfig and --namespace.
	AgentArgs []string
}

// JoinedCluster is a downstream cluster joined as a user would join it: the
// manifests printed by the `fleet` CLI applied downstream, and the real
// fleet-agent binary started from them.
type JoinedCluster struct {
	JoinInput
	// Local is an admin client of the downstream cluster.
	Local client.Client
	// Agent is the agent process started last.
	Agent *framework.Process
	// Agents are every agent process started for the cluster.
	Agents []*framework.Process
	// Cluster is the Fleet Cluster the agent registered, and Cred the
	// credential it stored (set by WaitRegistered).
	Cluster *fleet.Cluster
	Cred    *upstream.Credential
}

// NewJoinedCluster prepares in.Downstream to join; nothing is applied or
// started yet.
func NewJoinedCluster(in JoinInput) *JoinedCluster {
	ginkgo.GinkgoHelper()
	gomega.Expect(in.Upstream).NotTo(gomega.BeNil(), "JoinInput.Upstream is required")
	gomega.Expect(in.Downstream).NotTo(gomega.BeNil(), "JoinInput.Downstream is required")
	gomega.Expect(in.Admin).NotTo(gomega.BeNil(), "JoinInput.Admin is required")
	gomega.Expect(in.LogDir).NotTo(gomega.BeEmpty(), "JoinInput.LogDir is required")
	local, err := in.Downstream.Client(kinds.Scheme())
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return &JoinedCluster{JoinInput: in, Local: local}
}

// Join joins in.Downstream: token and agent config applied, agent started,
// and registration waited for (at most timeout).
func Join(ctx context.Context, in JoinInput, timeout time.Duration) *JoinedCluster {
	ginkgo.GinkgoHelper()
	j := NewJoinedCluster(in)
	j.ApplyToken(ctx)
	j.ApplyConfig(ctx)
	j.StartAgent()
	j.WaitRegistered(ctx, timeout)
	return j
}

func (j *JoinedCluster) namespace() string {
	if j.SystemNamespace == "" {
		return fleet.DefaultSystemNamespace
	}
	return j.SystemNamespace
}

// ApplyToken applies a fresh registration token downstream, as printed by
// `fleet install agent-token` with extra arguments (and --server-url
// APIServerURL when that is set: the agent never sees another address,
// which a running agent, looking for new bootstraps, would otherwise use).
func (j *JoinedCluster) ApplyToken(ctx context.Context, extra ...string) {
	ginkgo.GinkgoHelper()
	args := []string{"install", "agent-token", "-k", j.Upstream.Kubeconfig}
	if j.SystemNamespace != "" {
		args = append(args, "--system-namespace", j.SystemNamespace)
	}
	if j.APIServerURL != "" {
		args = append(args, "--server-url", j.APIServerURL)
	}
	tokenYAML, err := framework.Run("fleet", append(args, extra...)...)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(framework.ApplyYAML(ctx, j.Local, tokenYAML)).To(gomega.Succeed())
}

// ApplyConfig applies the agent config printed by `fleet install
// agent-config` with the input's ConfigArgs; without any it does nothing.
func (j *JoinedCluster) ApplyConfig(ctx context.Context) {
	ginkgo.GinkgoHelper()
	if len(j.ConfigArgs) == 0 {
		return
	}
	args := []string{"install", "agent-config"}
	if j.SystemNamespace != "" {
		args = append(args, "--system-namespace", j.SystemNamespace)
	}
	configYAML, err := framework.Run("fleet", append(args, j.ConfigArgs...)...)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(framework.ApplyYAML(ctx, j.Local, configYAML)).To(gomega.Succeed())
}

// StartAgent starts one more agent process for the cluster, with the input's
// AgentArgs and then extra, each with a log of its own. It becomes j.Agent.
// Stopping it is the caller's: it may span specs.
func (j *JoinedCluster) StartAgent(extra ...string) *framework.Process {
	ginkgo.GinkgoHelper()
	args := []string{"--kubeconfig", j.Downstream.Kubeconfig}
	if j.SystemNamespace != "" {
		args = append(args, "--namespace", j.SystemNamespace)
	}
	args = append(append(args, j.AgentArgs...), extra...)
	name := fmt.Sprintf("agent-%s-%s-%d", j.Downstream.Name, j.namespace(), len(j.Agents)+1)
	p, err := framework.Start(j.LogDir, name, "fleet-agent", args...)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	j.Agent = p
	j.Agents = append(j.Agents, p)
	return p
}

// StopAgents stops every agent process started for the cluster.
func (j *JoinedCluster) StopAgents() {
	for _, p := range j.Agents {
		p.Stop()
	}
}

// WaitRegistered waits, at most timeout, for the agent to store its
// credential, then reads the Cluster it names.
func (j *JoinedCluster) WaitRegistered(ctx context.Context, timeout time.Duration) {
	ginkgo.GinkgoHelper()
	WaitFor(fmt.Sprintf("the agent of %s to store its credential", j.Downstream.Name), func(g gomega.Gomega) {
		cred, err := upstream.LoadStored(ctx, j.Local, j.namespace())
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(cred).NotTo(gomega.BeNil(), "no credential stored yet; agent log:\n%s", j.Agent.Tail(6000))
		j.Cred = cred
	}, timeout, 200*time.Millisecond)
	j.Cluster = &fleet.Cluster{}
	gomega.Expect(j.Admin.Get(ctx, types.NamespacedName{Namespace: j.Cred.Namespace, Name: j.Cred.ClusterName}, j.Cluster)).To(gomega.Succeed())
}

// CredClient is a client built from the credential the agent stored: the
// agent's own rights, not an admin's.
func (j *JoinedCluster) CredClient() client.WithWatch {
	ginkgo.GinkgoHelper()
	c, err := client.NewWithWatch(j.Cred.RESTConfig(), client.Options{Scheme: kinds.Scheme()})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return c
}
