package agentbundle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/target"
)

// Reconciler keeps the agent Bundles of the registered Clusters of one
// namespace per reconcile (the request's Name is the namespace).
type Reconciler struct {
	Client client.Client
	// Image is the agent image the manager offers (default
	// agentinstall.DefaultImage), and ImagePullPolicy its pull policy.
	Image           string
	ImagePullPolicy corev1.PullPolicy
	// ImagePullSecrets name the Secrets the agent's image is pulled with,
	// which the install copied into the agent's namespace.
	ImagePullSecrets []string
	// MaxUnavailable bounds the clusters of a namespace moving to a new
	// image, or not Ready at their current one, at once: a number or a
	// share of the namespace's registered clusters (default 10%, at least
	// one).
	MaxUnavailable *intstr.IntOrString
	// Workers is the number of namespaces reconciled at once.
	Workers int

	mu sync.Mutex
	// written remembers the agent Bundles this controller wrote and the
	// cache does not show yet, so that the next pass counts them in flight.
	written map[types.NamespacedName]writtenBundle
	// rendered keeps each Cluster's last rendered agent Bundle: a pass
	// looks at every cluster of a namespace, and rendering one costs about
	// a millisecond, so only a changed Cluster or image renders again.
	rendered map[types.UID]renderedBundle
}

type writtenBundle struct{ hash, image string }

type renderedBundle struct {
	namespace      string
	generation     int64
	agentNS, image string
	pullPolicy     corev1.PullPolicy
	bundle         *fleet.Bundle
}

func (r *Reconciler) defaults() error {
	if r.Image == "" {
		r.Image = agentinstall.DefaultImage
	}
	if r.MaxUnavailable == nil {
		r.MaxUnavailable = &DefaultMaxUnavailable
	}
	if _, err := Budget(*r.MaxUnavailable, 10); err != nil {
		return err
	}
	r.written = map[types.NamespacedName]writtenBundle{}
	r.rendered = map[types.UID]renderedBundle{}
	return nil
}

// SetupWithManager registers the controller: Clusters (their spec, their
// first check-in, where their agent runs), agent Bundles and their
// BundleDeployments bring back their namespace.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := r.defaults(); err != nil {
		return err
	}
	isAgentBundle := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[fleet.AgentBundleLabel] == "true" })
	return ctrl.NewControllerManagedBy(mgr).
		Named("agentbundle").
		Watches(&fleet.Cluster{}, handler.EnqueueRequestsFromMapFunc(namespaceOf), builder.WithPredicates(clusterPredicate())).
		Watches(&fleet.Bundle{}, handler.EnqueueRequestsFromMapFunc(namespaceOf), builder.WithPredicates(isAgentBundle)).
		Watches(&fleet.BundleDeployment{}, handler.EnqueueRequestsFromMapFunc(bundleNamespaceOf), builder.WithPredicates(isAgentBundle)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

func namespaceOf(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
}

func bundleNamespaceOf(_ context.Context, o client.Object) []reconcile.Request {
	ns := o.GetLabels()[fleet.BundleNamespaceLabel]
	if ns == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: ns}}}
}

// clusterPredicate passes what changes a Cluster's agent Bundle, not its
// heartbeats.
func clusterPredicate() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*fleet.Cluster), e.ObjectNew.(*fleet.Cluster)
			return o.Generation != n.Generation || Registered(o) != Registered(n) ||
				o.Status.Agent.Namespace != n.Status.Agent.Namespace || o.Status.Namespace != n.Status.Namespace ||
				target.OffSchedule(o) != target.OffSchedule(n)
		},
	}
}

// Reconcile plans one namespace's agent Bundles and writes those that
// change; outcome turns how that ended into the result (agent Bundles
// have no status of their own).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return outcome.Compute(ctx, outcome.Input{Err: r.reconcile(ctx, req)})
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) error {
	ns := req.Name
	log := ctrl.LoggerFrom(ctx).WithValues("namespace", ns)
	clusters := &fleet.ClusterList{}
	if err := r.Client.List(ctx, clusters, client.InNamespace(ns)); err != nil {
		return err
	}
	bundles := &fleet.BundleList{}
	if err := r.Client.List(ctx, bundles, client.InNamespace(ns), client.MatchingLabels{fleet.AgentBundleLabel: "true"}); err != nil {
		return err
	}
	existing := make(map[string]*fleet.Bundle, len(bundles.Items))
	for i := range bundles.Items {
		existing[bundles.Items[i].Name] = &bundles.Items[i]
	}

	var registered []*fleet.Cluster
	for i := range clusters.Items {
		c := &clusters.Items[i]
		if !Registered(c) {
			continue
		}
		if existing[BundleName(c.Name)] == nil {
			if foreign, err := r.foreign(ctx, client.ObjectKey{Namespace: ns, Name: BundleName(c.Name)}); err != nil || foreign {
				if err != nil {
					return err
				}
				continue // not planned: it would hold a share of the budget it cannot use
			}
		}
		registered = append(registered, c)
	}
	sort.Slice(registered, func(i, j int) bool { return registered[i].Name < registered[j].Name })
	cands := make([]Candidate, len(registered))
	for i, c := range registered {
		var err error
		if cands[i], err = r.candidate(ctx, c, existing[BundleName(c.Name)]); err != nil {
			return err
		}
		cands[i].Held = target.OffSchedule(c)
	}
	budget, err := Budget(*r.MaxUnavailable, len(registered))
	if err != nil {
		return err
	}
	images := Plan(cands, r.Image, budget)

	r.forgetRendered(ns, registered)
	var errs []error
	wanted := map[string]bool{}
	for i, c := range registered {
		name := BundleName(c.Name)
		wanted[name] = true
		if images[i] == "" {
			log.V(1).Info("Holding back the agent Bundle of a new cluster: the rollout's budget is spent", "cluster", c.Name, "budget", budget)
			continue
		}
		if images[i] != cands[i].Current {
			log.Info("Moving a cluster's agent to the offered image", "cluster", c.Name, "from", cands[i].Current, "to", images[i], "budget", budget)
		}
		errs = append(errs, r.write(ctx, c, images[i], existing[name]))
	}
	for name, b := range existing {
		if !wanted[name] {
			// Its Cluster is gone or being deleted; keepResources leaves the
			// agent where it is.
			errs = append(errs, client.IgnoreNotFound(r.Client.Delete(ctx, b, client.Preconditions{UID: &b.UID})))
			r.mu.Lock()
			delete(r.written, client.ObjectKeyFromObject(b))
			r.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// candidate is how the rollout sees a cluster: the image of its agent
// Bundle (as written last, when the cache is behind) and whether its agent
// runs that Bundle's version, Ready.
func (r *Reconciler) candidate(ctx context.Context, c *fleet.Cluster, b *fleet.Bundle) (Candidate, error) {
	key := types.NamespacedName{Namespace: c.Namespace, Name: BundleName(c.Name)}
	r.mu.Lock()
	w, pending := r.written[key]
	if pending && b != nil && b.Labels[fleet.AgentBundleHashLabel] == w.hash {
		delete(r.written, key)
		pending = false
	}
	r.mu.Unlock()
	if pending {
		return Candidate{Current: w.image}, nil
	}
	if b == nil {
		return Candidate{}, nil
	}
	bd := &fleet.BundleDeployment{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Status.Namespace, Name: b.Name}, bd)
	switch {
	case apierrors.IsNotFound(err):
		bd = nil
	case err != nil:
		return Candidate{}, err
	}
	return Candidate{Current: b.Annotations[fleet.AgentImageAnnotation], Available: Available(b, bd)}, nil
}

// write creates or updates a Cluster's agent Bundle when it differs from
// what it should be.
func (r *Reconciler) write(ctx context.Context, c *fleet.Cluster, image string, b *fleet.Bundle) error {
	want, err := r.desired(c, image)
	if err != nil {
		return fmt.Errorf("rendering the agent Bundle of cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	key := client.ObjectKeyFromObject(want)
	remember := func() {
		r.mu.Lock()
		r.written[key] = writtenBundle{hash: want.Labels[fleet.AgentBundleHashLabel], image: image}
		r.mu.Unlock()
	}
	if b == nil {
		err := r.Client.Create(ctx, want)
		if apierrors.IsAlreadyExists(err) {
			// Made by this controller and not in the cache yet (its event
			// brings the namespace back), or another's, made a moment ago
			// (the next pass leaves it out).
			return nil
		}
		if err == nil {
			remember()
		}
		return err
	}
	if equality.Semantic.DeepEqual(b.Spec, want.Spec) && equality.Semantic.DeepEqual(b.Labels, want.Labels) &&
		b.Annotations[fleet.AgentImageAnnotation] == image {
		return nil
	}
	patch := client.MergeFrom(b.DeepCopy())
	b.Labels, b.Spec = want.Labels, want.Spec
	if b.Annotations == nil {
		b.Annotations = map[string]string{}
	}
	b.Annotations[fleet.AgentImageAnnotation] = image
	if err := r.Client.Patch(ctx, b, patch); err != nil {
		return fmt.Errorf("updating agent Bundle %s: %w", key, err)
	}
	remember()
	return nil
}

// desired is Desired, rendered again only when the Cluster (its spec, or
// where its agent runs) or the image changed; the caller gets its own copy.
func (r *Reconciler) desired(c *fleet.Cluster, image string) (*fleet.Bundle, error) {
	r.mu.Lock()
	m, ok := r.rendered[c.UID]
	r.mu.Unlock()
	if ok && m.generation == c.Generation && m.agentNS == AgentNamespace(c) && m.image == image && m.pullPolicy == r.ImagePullPolicy {
		return m.bundle.DeepCopy(), nil
	}
	b, err := Desired(c, image, r.ImagePullPolicy, r.ImagePullSecrets)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.rendered[c.UID] = renderedBundle{namespace: c.Namespace, generation: c.Generation, agentNS: AgentNamespace(c), image: image,
		pullPolicy: r.ImagePullPolicy, bundle: b.DeepCopy()}
	r.mu.Unlock()
	return b, nil
}

// forgetRendered drops what was rendered for clusters of ns that are gone.
func (r *Reconciler) forgetRendered(ns string, registered []*fleet.Cluster) {
	live := make(map[types.UID]bool, len(registered))
	for _, c := range registered {
		live[c.UID] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, m := range r.rendered {
		if m.namespace == ns && !live[uid] {
			delete(r.rendered, uid)
		}
	}
}

// foreign tells whether a Bundle of the agent Bundle's name exists that this
// controller did not make (a GitRepo's, say): it is left alone, and that
// cluster's agent gets no settings or upgrades until it is renamed.
func (r *Reconciler) foreign(ctx context.Context, key types.NamespacedName) (bool, error) {
	b := &fleet.Bundle{}
	if err := r.Client.Get(ctx, key, b); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if b.Labels[fleet.AgentBundleLabel] == "true" {
		return false, nil
	}
	ctrl.LoggerFrom(ctx).Info("A Bundle not made by the manager has the name of a cluster's agent Bundle: that cluster's agent gets no settings or upgrades until it is renamed",
		"bundle", klog.KObj(b))
	return true, nil
}
