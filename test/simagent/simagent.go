// Package simagent runs many simulated agents in one process for scale tests.
// Each one registers for real (its own identity, registration and
// credential), then watches its own cluster namespace with that credential
// and, instead of deploying, records what it would apply and reports the
// BundleDeployment Ready. It also checks in like a real agent.
package simagent

import (
	"context"
	"crypto/ecdh"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent"
	"github.com/gitfleet/fleet/agent/bundledeployment"
	"github.com/gitfleet/fleet/agent/join"
	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/upstream"
	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/internal/sealing"
)

// Agent is one simulated cluster's agent.
type Agent struct {
	Name string
	Cred *upstream.Credential
	// Applied counts the deployments it "applied".
	Applied atomic.Int64
	// Started is true once it has checked in and listed its deployments
	// for the first time.
	Started atomic.Bool
	// FetchContent, when set, has it read each new content as the real
	// agent does before reporting a deployment Ready: a get of the Content,
	// or with ociContents a pull from the registry its Secret names. Each
	// content is read once (the real agent caches them too).
	FetchContent atomic.Bool
	// ContentFetches and ContentBytes count the contents it read and their
	// manifests' bytes, ContentRetries the reads that failed and were
	// tried again.
	ContentFetches, ContentBytes, ContentRetries atomic.Int64

	// fetched are the contents it read (only Run's goroutine uses it).
	fetched map[string]bool
	// observe is told of deployments as the agent sees them (SetObserver).
	observe atomic.Pointer[func(*fleet.BundleDeployment)]

	c  client.WithWatch
	hb *agent.Heartbeat
}

// Prepare writes, in the host cluster, what an install leaves for agent i: a
// system namespace sim-<i> with the bootstrap Secret and a ConfigMap giving
// it the identity sim-<i> and labels.
func Prepare(ctx context.Context, host client.Client, i int, boot *agentinstall.Bootstrap, labels map[string]string) (string, error) {
	ns := fmt.Sprintf("sim-%d", i)
	cfg := &agentinstall.AgentConfig{ClientID: ns, Labels: labels}
	objs, err := agentinstall.Objects(agentinstall.Options{Namespace: ns, Bootstrap: boot, Config: cfg, NoDeployment: true})
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		if err := host.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	return ns, nil
}

// Register runs the real registration of the agent whose system namespace
// in the host cluster is ns.
func Register(ctx context.Context, host client.Client, ns string) (*Agent, error) {
	// The real agent's backoff between attempts (its flags' defaults, 1s to
	// a minute): a faster one would make thousands of simulated agents
	// retry harder than real ones when registration is slow.
	cred, err := join.Ensure(ctx, join.Options{Namespace: ns, Local: host})
	if err != nil {
		return nil, err
	}
	cfg := cred.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0
	// Watches are long requests: like a reflector's, they end by the
	// server's timeout (TimeoutSeconds), not the client's.
	cfg.Timeout = 0
	c, err := upstream.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	hb := &agent.Heartbeat{Client: c, ClusterNamespace: cred.ClusterNamespace, AgentNamespace: ns, Interval: time.Minute}
	return &Agent{Name: ns, Cred: cred, c: c, hb: hb}, nil
}

// Run checks in, then watches the agent's BundleDeployments and reports each
// new deploymentID applied and Ready, until ctx ends; watches that end are
// resumed.
func (a *Agent) Run(ctx context.Context) {
	// Like the real agent, it checks in once as it starts.
	for ctx.Err() == nil && a.Beat(ctx) != nil {
		sleep(ctx, time.Second)
	}
	// Like a reflector: list, then watch from there; a watch that ends is
	// resumed from the last version seen, and only an error (such as 410
	// Gone) or a failed watch brings a new list.
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list := &fleet.BundleDeploymentList{}
			if err := a.c.List(ctx, list, client.InNamespace(a.Cred.ClusterNamespace)); err != nil {
				sleep(ctx, time.Second)
				continue
			}
			for i := range list.Items {
				a.apply(ctx, &list.Items[i])
			}
			rv = list.ResourceVersion
			a.Started.Store(true)
		}
		timeout := int64(300 + rand.IntN(300)) // 5 to 10 minutes, as reflectors do
		w, err := a.c.Watch(ctx, &fleet.BundleDeploymentList{}, client.InNamespace(a.Cred.ClusterNamespace),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, TimeoutSeconds: &timeout}})
		if err != nil {
			rv = ""
			sleep(ctx, time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = ""
				break
			}
			bd, ok := ev.Object.(*fleet.BundleDeployment)
			if !ok {
				continue
			}
			rv = bd.ResourceVersion
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				a.apply(ctx, bd)
			}
		}
		w.Stop()
	}
}

// SetObserver has fn told, on the agent's goroutine, of each deployment
// the agent sees in its watch or list (its status as read) and of each
// Ready status it wrote, once the API server took it (the status as
// written); nil stops it. A bench times rollouts by these, as the agents
// see and report them, without a watch of its own on the API server.
func (a *Agent) SetObserver(fn func(*fleet.BundleDeployment)) {
	if fn == nil {
		a.observe.Store(nil)
		return
	}
	a.observe.Store(&fn)
}

func (a *Agent) observed(bd *fleet.BundleDeployment) {
	if fn := a.observe.Load(); fn != nil {
		(*fn)(bd)
	}
}

func (a *Agent) apply(ctx context.Context, bd *fleet.BundleDeployment) {
	a.observed(bd)
	if bd.Spec.DeploymentID == "" || bd.Spec.Paused || (bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID && bd.Status.Ready) {
		return
	}
	// A real agent's reconcile is requeued with backoff when its status
	// write fails (the API server busy: 429, timeouts): so is this one. A
	// conflict means a newer version is on its way in the watch, which
	// brings this back with it.
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 12, Cap: 10 * time.Second}
	retriable := func(err error) bool {
		return ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err)
	}
	if a.FetchContent.Load() {
		// The registry Secret is written just after the BundleDeployment:
		// a read that finds none is retried, as the real agent requeues.
		if err := retry.OnError(backoff, func(error) bool { return ctx.Err() == nil }, func() error {
			err := a.fetch(ctx, bd)
			if err != nil {
				a.ContentRetries.Add(1)
			}
			return err
		}); err != nil {
			return
		}
	}
	ReadyStatus(bd)
	// The real agent's status write: the status alone, at the version it
	// was computed from.
	body, err := bundledeployment.StatusOnly(bd)
	if err != nil {
		return
	}
	err = retry.OnError(backoff, retriable, func() error {
		return a.c.Status().Update(ctx, body.DeepCopy())
	})
	if err == nil {
		a.Applied.Add(1)
		a.observed(bd)
	}
}

// fetch reads bd's content once, as the real agent does
// (agent/bundledeployment: content and pullContent), with the agent's own
// credential, and unpacks it.
func (a *Agent) fetch(ctx context.Context, bd *fleet.BundleDeployment) error {
	name, _, _ := strings.Cut(bd.Spec.DeploymentID, ":")
	if a.fetched[name] {
		return nil
	}
	var n int
	if bd.Spec.OCIContents {
		sec := &corev1.Secret{}
		if err := a.c.Get(ctx, client.ObjectKeyFromObject(bd), sec); err != nil {
			return err
		}
		o, err := ocistorage.FromSecret(sec)
		if err != nil {
			return err
		}
		raw, err := o.Pull(ctx, nil, name, content.MaxSize)
		if err != nil {
			return err
		}
		if _, err := content.Unmarshal(raw); err != nil {
			return err
		}
		n = len(raw)
	} else {
		c := &fleet.Content{}
		if err := a.c.Get(ctx, client.ObjectKey{Name: name}, c); err != nil {
			return err
		}
		if _, err := content.Decode(c); err != nil {
			return err
		}
		n = len(c.Content)
	}
	if a.fetched == nil {
		a.fetched = map[string]bool{}
	}
	a.fetched[name] = true
	a.ContentFetches.Add(1)
	a.ContentBytes.Add(int64(n))
	return nil
}

// ReadyStatus sets what the real agent writes in the status of a deployment
// it installed and found ready (agent/bundledeployment/bundledeployment_status.go),
// field for field, so that every write, watch event and managed-fields
// computation weighs what it weighs with real agents: the release, the
// applied deploymentID, the deployed objects and their counts (one
// ConfigMap, as the bench's bundles hold), the four conditions and the
// display.
func ReadyStatus(bd *fleet.BundleDeployment) {
	st := &bd.Status
	release := "default/" + bd.Name + ":1"
	st.Release, st.AppliedDeploymentID = release, bd.Spec.DeploymentID
	st.Ready, st.NonModified = true, true
	st.NonReadyStatus, st.ModifiedStatus, st.IncompleteState = nil, nil, false
	st.Resources = []fleet.BundleDeploymentResource{{Kind: "ConfigMap", APIVersion: "v1", Namespace: "default", Name: bd.Name}}
	st.ResourceCounts = fleet.ResourceCounts{DesiredReady: 1, Ready: 1}
	for _, c := range []metav1.Condition{
		{Type: fleet.ConditionInstalled, Reason: fleet.ReasonInstalled, Message: "release " + release},
		{Type: fleet.ConditionDeployed, Reason: fleet.ReasonDeployed},
		{Type: fleet.ConditionMonitored, Reason: fleet.ReasonMonitored},
		{Type: fleet.ConditionReady, Reason: fleet.ReasonReady},
	} {
		c.Status, c.ObservedGeneration = metav1.ConditionTrue, bd.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
	st.Display = fleet.BundleDeploymentDisplay{Deployed: "True", Monitored: "True", State: string(fleet.Ready)}
}

// PublishSealingKey makes the agent a sealing key pair, as the real agent
// does at its first start (agent/sealkey), and checks in to publish its
// public key on the Lease; it returns the private key, which opens what the
// manager seals to it. It must not run while Beat does.
func (a *Agent) PublishSealingKey(ctx context.Context) (*ecdh.PrivateKey, error) {
	key, err := sealing.NewKey()
	if err != nil {
		return nil, err
	}
	public := sealing.EncodePublicKey(key.PublicKey())
	a.hb.SealingKey = func() string { return public }
	return key, a.Beat(ctx)
}

// Beat checks in once, as the real agent's heartbeat does: it renews its
// check-in Lease in its cluster namespace, with one Heartbeat for the
// agent's life as the real agent keeps (its first check-in differs from
// the later ones).
func (a *Agent) Beat(ctx context.Context) error {
	return a.hb.Beat(ctx)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// RegisterAll prepares and registers n agents at once, returning them and
// how long each took to register, from the common start after preparing.
func RegisterAll(ctx context.Context, host client.Client, n int, boot *agentinstall.Bootstrap, labels func(i int) map[string]string) ([]*Agent, []time.Duration, error) {
	if err := PrepareAll(ctx, host, n, boot, labels); err != nil {
		return nil, nil, err
	}
	return RegisterPrepared(ctx, host, n)
}

// PrepareAll prepares agents 0 to n-1 (see Prepare).
func PrepareAll(ctx context.Context, host client.Client, n int, boot *agentinstall.Bootstrap, labels func(i int) map[string]string) error {
	for i := range n {
		if _, err := Prepare(ctx, host, i, boot, labels(i)); err != nil {
			return err
		}
	}
	return nil
}

// RegisterPrepared registers the prepared agents 0 to n-1 at once,
// returning them and how long each took.
func RegisterPrepared(ctx context.Context, host client.Client, n int) ([]*Agent, []time.Duration, error) {
	return RegisterPreparedCounting(ctx, host, n, nil)
}

// RegisterPreparedCounting is RegisterPrepared, adding one to registered
// (when not nil) as each agent holds its credential: how far a long
// registration has got while it runs.
func RegisterPreparedCounting(ctx context.Context, host client.Client, n int, registered *atomic.Int64) ([]*Agent, []time.Duration, error) {
	agents := make([]*Agent, n)
	took := make([]time.Duration, n)
	errs := make([]error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agents[i], errs[i] = Register(ctx, host, fmt.Sprintf("sim-%d", i))
			took[i] = time.Since(start)
			if registered != nil && errs[i] == nil {
				registered.Add(1)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, nil, fmt.Errorf("agent %d: %w", i, err)
		}
	}
	return agents, took, nil
}

// HostClient is a client for the host cluster holding the agents' local
// objects, without client-side throttling.
func HostClient(cfg *rest.Config) (client.Client, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	return client.New(c, client.Options{Scheme: kinds.Scheme()})
}
