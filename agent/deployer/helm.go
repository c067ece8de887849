package deployer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// DefaultMaxHistory is the number of revisions kept per release unless
// helm.maxHistory says otherwise.
const DefaultMaxHistory = 5

// defaultWaitTimeout bounds a Helm wait (atomic, waitForJobs) without
// helm.timeoutSeconds, as the helm CLI's default does.
const defaultWaitTimeout = 5 * time.Minute

// Deployer installs, upgrades and uninstalls the releases of one agent in
// its own cluster.
type Deployer struct {
	config *rest.Config
	client client.Client
	// core reads and writes release records (Secrets): the typed core
	// client alone, not a whole clientset (a client for every API group)
	// for the agent and for each serviceAccount a bundle names.
	core      corev1client.CoreV1Interface
	discovery discovery.CachedDiscoveryInterface
	// directDiscovery is the uncached discovery client under discovery.
	directDiscovery  discovery.DiscoveryInterface
	mapper           *kinds.Mapper
	clusterNamespace string

	// SystemNamespace is the agent's own namespace; deleteNamespace never
	// deletes it.
	SystemNamespace string
	// NamespaceMissingRetry is how often a bundle with createNamespace:
	// false looks again for its missing namespace; default
	// DefaultNamespaceMissingRetry.
	NamespaceMissingRetry time.Duration
}

// New returns a Deployer for the cluster cfg points at. clusterNamespace is
// the agent's cluster namespace upstream; it marks the releases as its own.
func New(cfg *rest.Config, c client.Client, clusterNamespace string) (*Deployer, error) {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc := memory.NewMemCacheClient(dc)
	return &Deployer{
		config: cfg, client: c, core: core, discovery: disc, directDiscovery: dc,
		mapper:           kinds.NewMapper(disc),
		clusterNamespace: clusterNamespace,
	}, nil
}

// ReleaseKey names a release.
type ReleaseKey = release.Key

// ReleaseFor is the release of a BundleDeployment (see release.For).
func ReleaseFor(bdName string, opts fleet.BundleDeploymentOptions) ReleaseKey {
	return release.For(bdName, opts)
}

func lastRelease(s *storage.Storage, key ReleaseKey) (*helmrelease.Release, error) {
	r, err := s.Last(key.Name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	return r, err
}

// actionConfig is a Helm configuration for one release namespace, acting
// as id: objects, hooks, CRDs and release records alike. With
// forceNamespace every manifest Helm builds is put into that namespace; the
// returned confinedKube then tells of a violation (nil without one).
func (d *Deployer) actionConfig(ctx context.Context, id *identity, namespace, forceNamespace string) (*action.Configuration, *confinedKube, error) {
	getter := &restClientGetter{config: id.config, namespace: namespace, mapper: d.mapper,
		discovery: openAPIPerDeploy{CachedDiscoveryInterface: d.discovery, direct: d.directDiscovery}}
	log := ctrl.LoggerFrom(ctx).V(2)
	ac := &action.Configuration{}
	if err := ac.Init(getter, namespace, "secret", func(format string, v ...interface{}) {
		log.Info(fmt.Sprintf(format, v...))
	}); err != nil {
		return nil, nil, err
	}
	ac.Releases = id.storage(namespace)
	kc, ok := ac.KubeClient.(*kube.Client)
	if !ok {
		return nil, nil, fmt.Errorf("unexpected Helm client %T", ac.KubeClient)
	}
	kc.Namespace = namespace
	if forceNamespace == "" {
		return ac, nil, nil
	}
	confined := &confinedKube{Client: kc, namespace: forceNamespace, scope: d.mapper.Scope}
	ac.KubeClient = confined
	return ac, confined, nil
}

// Input is one deployment to make.
type Input struct {
	// Name is the BundleDeployment's name.
	Name string
	// DeploymentID is the BundleDeployment's spec.deploymentID.
	DeploymentID string
	// Options are the BundleDeployment's spec.options.
	Options fleet.BundleDeploymentOptions
	// Files are the bundle's files, from its Content.
	Files Files
}

// Deploy installs or upgrades the release of a BundleDeployment. A release
// left pending by an interrupted agent is recovered first. Errors the
// bundle's author must fix are Stalling: fleet.ReasonInvalidBundle for files
// that make no chart, fleet.ReasonInvalidValues or fleet.ReasonSecretNotFound
// for values, fleet.ReasonInstallFailed for an install or upgrade Helm or the
// API server refused, fleet.ReasonNamespaceViolation for CRDs or hooks that
// break a forced namespace, fleet.ReasonForbidden for what the bundle's
// serviceAccount may not do.
//
// With options.serviceAccount every step runs as that account (see
// identity); with options.namespace the templates, the hooks and the CRDs
// obey it or the bundle is refused.
func (d *Deployer) Deploy(ctx context.Context, in Input) (*helmrelease.Release, error) {
	key := ReleaseFor(in.Name, in.Options)
	layout, err := Detect(in.Files, in.Options)
	if err != nil {
		return nil, outcome.Stall(fleet.ReasonInvalidBundle, err)
	}
	ch, err := BuildChart(in.Files, layout, in.Options, key.Name)
	if err != nil {
		return nil, outcome.Stall(fleet.ReasonInvalidBundle, err)
	}
	if err := checkCRDs(ch, in.Options.TargetNamespace); err != nil {
		return nil, err
	}
	Annotate(ch, in.Name, d.clusterNamespace, in.DeploymentID, in.Options)
	id, err := d.as(key.Namespace, in.Options.ServiceAccount)
	if err != nil {
		return nil, err
	}
	values, err := Values(ctx, id.client, in.Options, key.Namespace)
	if err != nil {
		return nil, stallUnlessTransient(fleet.ReasonInvalidValues, forbidden(id, err))
	}
	// A GitRepoRestriction's allowedTargetNamespaceSelector is checked here,
	// against the namespace downstream, as Fleet's agent checks it; by the
	// agent itself, whatever the bundle's serviceAccount may read.
	if err := namespaceSelected(ctx, d.client, key.Namespace, in.Options.AllowedTargetNamespaceSelector, d.namespaceMissingRetry()); err != nil {
		return nil, err
	}
	// The release namespace is created when missing, as Fleet's agent does
	// (repositories rely on defaultNamespace alone), unless the bundle says
	// createNamespace: false; namespaceLabels and namespaceAnnotations are
	// applied to it.
	if err := ensureNamespace(ctx, id, key.Namespace, in.Options, d.namespaceMissingRetry()); err != nil {
		return nil, forbidden(id, err)
	}
	ac, confined, err := d.actionConfig(ctx, id, key.Namespace, in.Options.TargetNamespace)
	if err != nil {
		return nil, err
	}
	last, err := lastRelease(ac.Releases, key)
	if err != nil {
		return nil, err
	}
	if last != nil && last.Info.Status.IsPending() {
		if last, err = recoverPending(ctx, ac, key, last); err != nil {
			return nil, err
		}
	}
	pr := &postRenderer{
		files: in.Files, layout: layout, kustomize: layout.Style == StyleHelm && layout.HasKustomize,
		target: Target{ReleaseName: key.Name, ReleaseNamespace: key.Namespace, ForceNamespace: in.Options.TargetNamespace,
			KeepCRDs: !in.Options.DeleteCRDResources},
		scope: d.mapper.Scope,
	}
	h := fleet.HelmOptions{}
	if in.Options.Helm != nil {
		h = *in.Options.Helm
	}
	timeout := time.Duration(h.TimeoutSeconds) * time.Second
	// As in Fleet, a timeout is how long to wait for the release's objects
	// to become ready: setting one makes the release wait.
	wait := h.Atomic || h.WaitForJobs || timeout > 0
	if wait && timeout == 0 {
		timeout = defaultWaitTimeout
	}
	labels := map[string]string{fleet.ManagedLabel: "true", fleet.ClusterNamespaceLabel: d.clusterNamespace}
	var rel *helmrelease.Release
	if last == nil {
		i := action.NewInstall(ac)
		i.ReleaseName, i.Namespace = key.Name, key.Namespace
		i.PostRenderer, i.Labels = pr, labels
		i.Timeout, i.Wait, i.WaitForJobs, i.Atomic = timeout, wait, h.WaitForJobs, h.Atomic
		i.TakeOwnership, i.SkipSchemaValidation, i.EnableDNS = h.TakeOwnership, h.SkipSchemaValidation, !h.DisableDNS
		rel, err = i.RunWithContext(ctx, ch, values)
	} else {
		u := action.NewUpgrade(ac)
		u.Namespace = key.Namespace
		u.PostRenderer, u.Labels = pr, labels
		u.Timeout, u.Wait, u.WaitForJobs, u.Atomic = timeout, wait, h.WaitForJobs, h.Atomic
		// An upgrade adopts objects that exist already, as Fleet's does: a
		// manifest added to a deployed bundle for an object made by hand
		// takes it over instead of failing the upgrade. The namespaces the
		// release may write stay confined all the same.
		u.TakeOwnership, u.SkipSchemaValidation, u.EnableDNS = true, h.SkipSchemaValidation, !h.DisableDNS
		u.Force, u.MaxHistory = h.Force, maxHistory(h)
		// Values are exactly what the BundleDeployment says, never the last
		// release's.
		u.ResetValues = true
		rel, err = u.RunWithContext(ctx, key.Name, ch, values)
	}
	if v := confined.namespaceViolation(); v != nil {
		return rel, v
	}
	if err != nil {
		return rel, stallUnlessTransient(fleet.ReasonInstallFailed, err)
	}
	return rel, nil
}

func maxHistory(h fleet.HelmOptions) int {
	if h.MaxHistory > 0 {
		return h.MaxHistory
	}
	return DefaultMaxHistory
}

// recoverPending brings back a release that an interrupted install, upgrade
// or rollback left pending: it rolls back to the last deployed revision, or
// uninstalls when there is none. It returns the release's latest revision
// afterwards (nil when uninstalled).
func recoverPending(ctx context.Context, ac *action.Configuration, key ReleaseKey, last *helmrelease.Release) (*helmrelease.Release, error) {
	log := ctrl.LoggerFrom(ctx)
	history, err := ac.Releases.History(key.Name)
	if err != nil {
		return nil, err
	}
	var previous *helmrelease.Release
	for _, r := range history {
		if r.Version < last.Version && (r.Info.Status == helmrelease.StatusDeployed || r.Info.Status == helmrelease.StatusSuperseded) &&
			(previous == nil || r.Version > previous.Version) {
			previous = r
		}
	}
	if previous == nil {
		log.Info("Uninstalling a release left pending by an interrupted install", "release", key.String(), "status", last.Info.Status)
		u := action.NewUninstall(ac)
		u.IgnoreNotFound = true
		if _, err := u.Run(key.Name); err != nil {
			return nil, fmt.Errorf("uninstalling pending release %s: %w", key, err)
		}
		return nil, nil
	}
	log.Info("Rolling back a release left pending by an interrupted operation", "release", key.String(),
		"status", last.Info.Status, "toRevision", previous.Version)
	rb := action.NewRollback(ac)
	rb.Version, rb.MaxHistory = previous.Version, DefaultMaxHistory
	if err := rb.Run(key.Name); err != nil {
		return nil, fmt.Errorf("rolling back pending release %s: %w", key, err)
	}
	return lastRelease(ac.Releases, key)
}

// DefaultNamespaceMissingRetry is how often a bundle with createNamespace:
// false looks again for its missing namespace: someone else is to create
// it, and no event the agent watches tells when they did.
const DefaultNamespaceMissingRetry = 30 * time.Second

// ensureNamespace creates the release namespace as id when missing (a
// Waiting error with fleet.ReasonNamespaceMissing instead when the options
// say createNamespace: false) and sets namespaceLabels and
// namespaceAnnotations on it. An account that may not read namespaces,
// asked for no labels or annotations, goes on: the install then tells
// whether the namespace is there.
func ensureNamespace(ctx context.Context, id *identity, name string, opts fleet.BundleDeploymentOptions, retry time.Duration) error {
	ns := &corev1.Namespace{}
	err := id.client.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsForbidden(err) && id.serviceAccount != "" && len(opts.NamespaceLabels) == 0 && len(opts.NamespaceAnnotations) == 0 {
		return nil
	}
	if apierrors.IsNotFound(err) && opts.CreateNamespace != nil && !*opts.CreateNamespace {
		return outcome.Waitf(fleet.ReasonNamespaceMissing, retry,
			"namespace %s does not exist and the bundle sets createNamespace: false: create the namespace in the cluster "+
				"(the bundle deploys within %s), or remove createNamespace: false to let the agent create it", name, retry)
	}
	if apierrors.IsNotFound(err) {
		ns.Name, ns.Labels, ns.Annotations = name, opts.NamespaceLabels, opts.NamespaceAnnotations
		if err := id.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading namespace %s: %w", name, err)
	}
	before := ns.DeepCopy()
	changed := false
	for k, v := range opts.NamespaceLabels {
		if ns.Labels[k] != v {
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[k], changed = v, true
		}
	}
	for k, v := range opts.NamespaceAnnotations {
		if ns.Annotations[k] != v {
			if ns.Annotations == nil {
				ns.Annotations = map[string]string{}
			}
			ns.Annotations[k], changed = v, true
		}
	}
	if !changed {
		return nil
	}
	return id.client.Patch(ctx, ns, client.MergeFrom(before))
}

// namespaceSelected checks that the release namespace name exists and
// carries the labels sel selects; nil sel allows any. A refusal is a
// Waiting error with fleet.ReasonNamespaceNotAllowed, looked at again after
// retry (labelling a namespace sends the agent no event), whose message
// begins with Fleet's text. A selector that is not valid stalls.
func namespaceSelected(ctx context.Context, c client.Reader, name string, sel *metav1.LabelSelector, retry time.Duration) error {
	if sel == nil {
		return nil
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return outcome.Stallf(fleet.ReasonInvalidBundle, "allowedTargetNamespaceSelector is not a valid label selector: %v (fix the GitRepoRestriction)", err)
	}
	ns := &corev1.Namespace{}
	err = c.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		return outcome.Waitf(fleet.ReasonNamespaceNotAllowed, retry,
			"target namespace %s does not exist on downstream cluster: a GitRepoRestriction allows only namespaces selected by %s; "+
				"create it with those labels (the bundle deploys within %s)", name, selector, retry)
	}
	if err != nil {
		return fmt.Errorf("reading namespace %s: %w", name, err)
	}
	if !selector.Matches(labels.Set(ns.Labels)) {
		return outcome.Waitf(fleet.ReasonNamespaceNotAllowed, retry,
			"target namespace %s does not match AllowedTargetNamespaceSelector %s: label the namespace so that it matches "+
				"(the bundle deploys within %s), or deploy to a namespace that does", name, selector, retry)
	}
	return nil
}

func (d *Deployer) namespaceMissingRetry() time.Duration {
	if d.NamespaceMissingRetry > 0 {
		return d.NamespaceMissingRetry
	}
	return DefaultNamespaceMissingRetry
}

// forbidden makes an API Forbidden met while acting as a serviceAccount a
// Stalling error with fleet.ReasonForbidden: the bundle asks for more than
// its account may do.
func forbidden(id *identity, err error) error {
	if id.serviceAccount == "" || !apierrors.IsForbidden(err) {
		return err
	}
	return outcome.Stallf(fleet.ReasonForbidden,
		"serviceAccount %s may not do what the bundle asks: %w; grant it the right downstream or change the bundle", id.serviceAccount, err)
}
