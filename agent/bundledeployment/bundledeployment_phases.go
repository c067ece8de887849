package bundledeployment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gitfleet/fleet/agent/deployrpc"
	"github.com/gitfleet/fleet/agent/monitor"
	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/summary"
)

// loadState finds the BundleDeployment's release: from memory, or from the
// Helm storage the first time (after a start, or when the release's name or
// namespace changed).
func (r *Reconciler) loadState(ctx context.Context, s *scope) error {
	if v, ok := r.state.Load(s.bd.Name); ok && v.(*releaseState).key == s.key {
		s.state = v.(*releaseState)
		return nil
	}
	st, err := r.readState(ctx, s.key)
	if err != nil {
		return err
	}
	r.remember(s.bd.Name, st)
	s.state = st
	return nil
}

func (r *Reconciler) readState(ctx context.Context, key release.Key) (*releaseState, error) {
	st := &releaseState{key: key}
	var err error
	if st.last, err = r.Downstream.Last(ctx, key); err != nil {
		return nil, err
	}
	if st.last != nil && st.last.Status() == release.StatusDeployed {
		st.deployed = st.last
	} else if st.deployed, err = r.Downstream.Deployed(ctx, key); err != nil {
		return nil, err
	}
	if st.deployed != nil {
		if st.desired, err = r.desiredObjects(st.deployed); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func (r *Reconciler) remember(bdName string, st *releaseState) {
	r.state.Store(bdName, st)
	r.releases.Store(st.key.String(), bdName)
}

// desiredObjects parses a release's manifest; objects of cluster-scoped
// kinds lose any namespace the manifest gave them, as the API server does.
func (r *Reconciler) desiredObjects(rel *release.Release) ([]*unstructured.Unstructured, error) {
	objs, err := monitor.DesiredObjects(rel.Manifest)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", release.Display(rel), err)
	}
	for _, o := range objs {
		namespaced, known := r.Downstream.Scope(o.GroupVersionKind())
		switch {
		case known && !namespaced:
			o.SetNamespace("")
		case known && o.GetNamespace() == "":
			o.SetNamespace(rel.Namespace)
		}
	}
	return objs, nil
}

// checkDependencies lists the dependsOn entries not yet in an accepted state
// on this cluster.
func (r *Reconciler) checkDependencies(ctx context.Context, s *scope) error {
	if len(s.bd.Spec.DependsOn) == 0 {
		return nil
	}
	list := &fleet.BundleDeploymentList{}
	if err := r.Upstream.List(ctx, list, client.InNamespace(r.ClusterNamespace)); err != nil {
		return err
	}
	if err := MissingDependency(s.bd, list.Items); err != nil {
		// Not deployed, in Fleet's words: ErrApplied until the bundle it
		// names targets this cluster (its BundleDeployment's arrival brings
		// this one back, see dependents).
		s.deployErr = err
		return err
	}
	s.waiting = UnmetDependencies(s.bd, list.Items)
	return nil
}

// MissingDependency is the error of the first dependsOn entry of bd that no
// BundleDeployment of its cluster satisfies, in Fleet's words, which its UI
// and tests match on ("list bundledeployments: no bundles matching labels
// fleet.cattle.io/bundle-name=db,fleet.cattle.io/bundle-namespace=fleet-default
// in namespace fleet-default"); nil when every entry has one. It stalls with
// reason WaitingForDependencies: the bundle it names must come to target this
// cluster, or the dependsOn entry change.
func MissingDependency(bd *fleet.BundleDeployment, all []fleet.BundleDeployment) error {
	bundleNamespace := bd.Labels[fleet.BundleNamespaceLabel]
	for _, ref := range bd.Spec.DependsOn {
		if ref.Name == "" && ref.Selector == nil {
			continue
		}
		found := false
		for i := range all {
			if all[i].Name != bd.Name && refersTo(ref, bd, &all[i]) {
				found = true
				break
			}
		}
		if found {
			continue
		}
		ls := &metav1.LabelSelector{}
		if ref.Selector != nil {
			ls = ref.Selector.DeepCopy()
		}
		if ref.Name != "" {
			ls = metav1.AddLabelToSelector(ls, fleet.BundleNameLabel, ref.Name)
			ls = metav1.AddLabelToSelector(ls, fleet.BundleNamespaceLabel, bundleNamespace)
		}
		what := metav1.FormatLabelSelector(ls)
		if sel, err := metav1.LabelSelectorAsSelector(ls); err == nil {
			what = sel.String()
		}
		return outcome.Stallf(fleet.ReasonWaitingForDeps, "list bundledeployments: no bundles matching labels %s in namespace %s", what, bundleNamespace)
	}
	return nil
}

// UnmetDependencies returns, for each dependsOn entry of bd not satisfied by
// the BundleDeployments of its cluster, what it waits for.
func UnmetDependencies(bd *fleet.BundleDeployment, all []fleet.BundleDeployment) []string {
	var waiting []string
	for _, ref := range bd.Spec.DependsOn {
		accepted := ref.AcceptedStates
		if len(accepted) == 0 {
			accepted = []fleet.BundleState{fleet.Ready}
		}
		what := ref.Name
		if what == "" && ref.Selector != nil {
			what = metav1.FormatLabelSelector(ref.Selector)
		}
		matched := 0
		for i := range all {
			dep := &all[i]
			if dep.Name == bd.Name || !refersTo(ref, bd, dep) {
				continue
			}
			matched++
			if st := summary.State(dep); !slices.Contains(accepted, st) {
				waiting = append(waiting, fmt.Sprintf("%s (%s)", dep.Labels[fleet.BundleNameLabel], st))
			}
		}
		if matched == 0 {
			waiting = append(waiting, what+" (not deployed to this cluster)")
		}
	}
	return waiting
}

// refersTo tells whether a dependsOn entry of bd names dep's bundle: by name,
// or by a selector over its labels, in the same bundle namespace.
func refersTo(ref fleet.BundleRef, bd, dep *fleet.BundleDeployment) bool {
	if dep.Labels[fleet.BundleNamespaceLabel] != bd.Labels[fleet.BundleNamespaceLabel] {
		return false
	}
	if ref.Name != "" {
		return dep.Labels[fleet.BundleNameLabel] == ref.Name || (dep.Labels[fleet.BundleNameLabel] == "" && dep.Name == ref.Name)
	}
	if ref.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
	return err == nil && sel.Matches(labels.Set(dep.Labels))
}

// dependents maps a BundleDeployment to those in its namespace that depend
// on it.
func (r *Reconciler) dependents(ctx context.Context, o client.Object) []reconcile.Request {
	dep, ok := o.(*fleet.BundleDeployment)
	if !ok {
		return nil
	}
	list := &fleet.BundleDeploymentList{}
	if err := r.Upstream.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		// A MapFunc cannot return an error; the resync brings the
		// dependents back later.
		ctrl.LoggerFrom(ctx).Error(err, "Could not list the BundleDeployments that may depend on this one", "bundleDeployment", klog.KObj(o))
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		bd := &list.Items[i]
		for _, ref := range bd.Spec.DependsOn {
			if bd.Name != dep.Name && refersTo(ref, bd, dep) {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: bd.Namespace, Name: bd.Name}})
				break
			}
		}
	}
	return reqs
}

// deploy installs or upgrades the release unless it already deploys the
// BundleDeployment's deploymentID, the BundleDeployment is paused or
// outside its cluster's deployment windows (offSchedule), or it waits for
// dependencies.
func (r *Reconciler) deploy(ctx context.Context, s *scope) error {
	bd := s.bd
	if !deployable(s) || (!needsDeploy(s) && !s.copiesChanged) {
		return nil
	}
	if !s.loaded {
		// Deployed again for a changed downstream copy: the files were not
		// read before the copies were applied.
		if err := r.openContent(ctx, s); err != nil {
			return err
		}
	}
	if err := r.heldBack(bd, time.Now()); err != nil {
		// Stopped at a bound of the deploy binary before: not again until
		// its backoff ends.
		s.deployErr = err
		return err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("release", s.key.String())
	if s.state.last == nil {
		// A first install under this name and namespace: a release this
		// BundleDeployment made under another (helm.releaseName or its
		// namespace changed) goes first, so that no workload is left
		// behind and the new release does not collide with the old one's
		// objects.
		if err := r.removeMovedReleases(ctx, bd.Name, s.key); err != nil {
			s.deployErr = err
			return err
		}
	}
	chart, err := r.chartSource(ctx, bd)
	if err != nil {
		s.deployErr = err
		return err
	}
	log.Info("Deploying", "deploymentID", bd.Spec.DeploymentID)
	// ctx's logger, not log: the deploy names the release on its lines.
	err = r.Downstream.Deploy(ctx, deployrpc.Deploy{
		Name: bd.Name, DeploymentID: bd.Spec.DeploymentID, Options: bd.Spec.Options, Resources: s.resources, Chart: chart,
	})
	err = r.noteDeploy(bd, err, time.Now())
	// Whatever happened, the release's records changed: read them again.
	st, rerr := r.readState(ctx, s.key)
	if rerr == nil {
		r.remember(bd.Name, st)
		s.state = st
	}
	if err != nil {
		// A Stalling error waits for a change of the BundleDeployment (or
		// the resync); a bound met waits for its backoff; any other backs
		// off.
		s.deployErr = err
		return err
	}
	if rerr != nil {
		return rerr
	}
	log.Info("Deployed", "version", st.last.Version)
	s.deployed = true
	return nil
}

// monitor checks the objects of the deployed release.
func (r *Reconciler) monitor(ctx context.Context, s *scope) error {
	if s.state.deployed == nil {
		return nil
	}
	// Right after a deploy the informers may not have seen the new objects
	// yet: read them from the API server.
	res, err := r.evaluate(ctx, s, s.deployed)
	if err != nil {
		s.monitorErr = err
		return err
	}
	s.monitored = res
	return nil
}

func (r *Reconciler) evaluate(ctx context.Context, s *scope, fresh bool) (*monitor.Result, error) {
	desired := s.state.desired
	live, extra, err := r.Watcher.Live(ctx, s.key.Namespace, s.key.Name, desired, fresh)
	if err != nil {
		return nil, err
	}
	res, err := monitor.Evaluate(desired, live, extra, monitor.OptionsFor(s.bd.Spec.Options))
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// correctDrift restores modified, missing and extra objects when
// correctDrift is enabled and the release is up to date, or, outside the
// cluster's deployment windows, to what the release deployed before: a
// new deploymentID waits for the window, what runs is still kept as
// deployed.
func (r *Reconciler) correctDrift(ctx context.Context, s *scope) error {
	cd := s.bd.Spec.CorrectDrift
	if cd == nil {
		cd = s.bd.Spec.Options.CorrectDrift
	}
	if cd == nil || !cd.Enabled || s.monitored == nil || s.monitored.NonModified || s.bd.Spec.Paused ||
		(!s.bd.Spec.OffSchedule && !release.UpToDate(s.state.deployed, s.bd.Spec.DeploymentID)) {
		return nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("release", s.key.String())
	var names []string
	for _, m := range s.monitored.Modified {
		names = append(names, m.Kind+" "+m.Namespace+"/"+m.Name)
	}
	log.Info("Correcting drift", "objects", strings.Join(names, ", "))
	if err := r.Downstream.Correct(ctx, s.key, s.bd.Spec.Options.ServiceAccount, s.monitored.ToApply, s.monitored.ToDelete, cd.Force); err != nil {
		return err
	}
	// Report the corrected state, read from the API server: the informers
	// may not have seen the correction yet.
	res, err := r.evaluate(ctx, s, true)
	if err != nil {
		return err
	}
	s.monitored = res
	return nil
}

// collectGarbage removes the releases of this agent whose BundleDeployment
// no longer exists, and releases left behind when a BundleDeployment moved
// to another release name or namespace, once the new one is deployed.
func (r *Reconciler) collectGarbage(ctx context.Context) error {
	r.gcMu.Lock()
	defer r.gcMu.Unlock()
	list := &fleet.BundleDeploymentList{}
	if err := r.Upstream.List(ctx, list, client.InNamespace(r.ClusterNamespace)); err != nil {
		return err
	}
	live := map[string]*fleet.BundleDeployment{}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			live[list.Items[i].Name] = &list.Items[i]
		}
	}
	owned, err := r.Downstream.Owned(ctx)
	if err != nil {
		return err
	}
	if r.APIReader != nil && hasOrphans(owned, live) {
		// Confirm with the API server before uninstalling: the cache may
		// be fed by a watch that outlives the agent's credential (a
		// Cluster being deleted with its workloads kept revokes the agent
		// before its deployments go), and a revoked agent must not read
		// their deletion as an order to uninstall.
		fresh := &fleet.BundleDeploymentList{}
		if err := r.APIReader.List(ctx, fresh, client.InNamespace(r.ClusterNamespace)); err != nil {
			return fmt.Errorf("confirming which BundleDeployments are gone before uninstalling their releases: %w", err)
		}
		for i := range fresh.Items {
			if _, ok := live[fresh.Items[i].Name]; !ok && fresh.Items[i].DeletionTimestamp.IsZero() {
				live[fresh.Items[i].Name] = &fresh.Items[i]
			}
		}
	}
	var errs []error
	for _, rel := range owned {
		name := release.Annotations(rel)[fleet.BundleDeploymentAnnotation]
		key := rel.Key()
		if bd := live[name]; bd != nil {
			current := release.For(bd.Name, bd.Spec.Options)
			if current == key {
				continue
			}
			if cur, err := r.Downstream.Deployed(ctx, current); err != nil || cur == nil {
				continue // keep the old release until the new one is deployed
			}
		}
		if err := r.Downstream.Uninstall(ctx, rel); err != nil {
			errs = append(errs, err)
			continue
		}
		r.releases.Delete(key.String())
		if live[name] == nil && r.Local != nil && release.Annotations(rel)[fleet.KeepResourcesAnnotation] != "true" {
			// Un-targeted: its downstreamResources go too, unless keepResources.
			if err := r.removeCopies(ctx, name, nil); err != nil {
				errs = append(errs, err)
			}
			r.copies.Delete(name)
		}
		if v, ok := r.state.Load(name); ok && v.(*releaseState).key == key {
			r.state.Delete(name)
		}
	}
	return errors.Join(errs...)
}

// removeMovedReleases uninstalls the releases of BundleDeployment bdName
// under another key than key: those it made before its release name or
// namespace changed.
func (r *Reconciler) removeMovedReleases(ctx context.Context, bdName string, key release.Key) error {
	r.gcMu.Lock()
	defer r.gcMu.Unlock()
	owned, err := r.Downstream.Owned(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, rel := range owned {
		if release.Annotations(rel)[fleet.BundleDeploymentAnnotation] != bdName || rel.Key() == key {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Uninstalling the release left under the old name or namespace", "old", rel.Key().String(), "new", key.String())
		if err := r.Downstream.Uninstall(ctx, rel); err != nil {
			errs = append(errs, fmt.Errorf("uninstalling release %s, which this bundle deployed before its release name or namespace changed: %w", rel.Key(), err))
			continue
		}
		r.releases.Delete(rel.Key().String())
	}
	return errors.Join(errs...)
}

// hasOrphans tells whether a release in owned belongs to no BundleDeployment
// in live.
func hasOrphans(owned []*release.Release, live map[string]*fleet.BundleDeployment) bool {
	for _, rel := range owned {
		if live[release.Annotations(rel)[fleet.BundleDeploymentAnnotation]] == nil {
			return true
		}
	}
	return false
}

// contentCache keeps recently used Contents' resources: they never change
// (their name is their hash) and many BundleDeployments share one.
type contentCache struct {
	mu    sync.Mutex
	files map[string][]fleet.BundleResource
	order []string
}

const contentCacheSize = 64

func (c *contentCache) get(name string) []fleet.BundleResource {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.files[name]
}

func (c *contentCache) put(name string, f []fleet.BundleResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil {
		c.files = map[string][]fleet.BundleResource{}
	}
	if _, ok := c.files[name]; ok {
		return
	}
	c.files[name] = f
	c.order = append(c.order, name)
	if len(c.order) > contentCacheSize {
		delete(c.files, c.order[0])
		c.order = c.order[1:]
	}
}

// content returns the resources of a BundleDeployment's Content, read with
// a direct get and checked (size and sha256), or, with ociContents, pulled
// by digest from its registry with the Secret next to it.
func (r *Reconciler) content(ctx context.Context, bd *fleet.BundleDeployment) ([]fleet.BundleResource, error) {
	if bd.Spec.HelmChartOptions != nil {
		// A HelmOp's: no Content, the deploy binary downloads the chart.
		return nil, nil
	}
	name, _, _ := strings.Cut(bd.Spec.DeploymentID, ":")
	if f := r.contents.get(name); f != nil {
		return f, nil
	}
	if bd.Spec.OCIContents {
		f, err := r.pullContent(ctx, bd, name)
		if err != nil {
			return nil, err
		}
		r.contents.put(name, f)
		return f, nil
	}
	c := &fleet.Content{}
	gctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if err := r.APIReader.Get(gctx, client.ObjectKey{Name: name}, c); err != nil {
		return nil, fmt.Errorf("reading content %s: %w", name, err)
	}
	f, err := content.Decode(c)
	if err != nil {
		return nil, outcome.Stall(fleet.ReasonInvalidBundle, err)
	}
	r.contents.put(name, f)
	return f, nil
}

// secretRetry is how long a deploy waits for a Secret the manager has not
// written yet.
const secretRetry = 5 * time.Second

// chartSource is, for a BundleDeployment with helmChartOptions (a HelmOp's),
// the chart the deploy binary downloads, as Fleet's agent downloads it: the
// one options.helm names, with the credentials of the Secret
// helmChartOptions.secretName names in the BundleDeployment's own (cluster)
// namespace, which the manager copies there; nil for any other
// BundleDeployment.
func (r *Reconciler) chartSource(ctx context.Context, bd *fleet.BundleDeployment) (*deployrpc.ChartSource, error) {
	o := bd.Spec.HelmChartOptions
	if o == nil {
		return nil, nil
	}
	h := bd.Spec.Options.Helm
	if h == nil {
		return nil, outcome.Stallf(fleet.ReasonInvalidBundle, "helmChartOptions is set but options.helm names no chart to download")
	}
	src := &deployrpc.ChartSource{Repo: h.Repo, Chart: h.Chart, Version: h.Version, InsecureSkipTLSVerify: o.InsecureSkipTLSverify}
	if o.SecretName == "" {
		return src, nil
	}
	sec := &corev1.Secret{}
	gctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	key := client.ObjectKey{Namespace: bd.Namespace, Name: o.SecretName}
	if err := r.APIReader.Get(gctx, key, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, outcome.Waitf(fleet.ReasonSecretNotFound, secretRetry,
				"the chart's credentials, Secret %s of helmChartOptions.secretName, are not there yet: the manager copies the HelmOp's helmSecretName there; check the Bundle's status if it stays missing", key)
		}
		return nil, fmt.Errorf("reading the chart's credentials, Secret %s: %w", key, err)
	}
	src.Username = string(sec.Data[corev1.BasicAuthUsernameKey])
	src.Password = string(sec.Data[corev1.BasicAuthPasswordKey])
	src.CABundle = sec.Data[fleet.HelmOpsCACertsKey]
	src.SecretName = key.String()
	return src, nil
}

// pullTimeout bounds one pull of a content from a registry.
const pullTimeout = 2 * time.Minute

// pullContent pulls the content named name, of a BundleDeployment in OCI
// storage, with the Secret of the same name in the cluster namespace. A
// Secret not written yet is waited for (the manager writes it once the
// BundleDeployment exists).
func (r *Reconciler) pullContent(ctx context.Context, bd *fleet.BundleDeployment, name string) ([]fleet.BundleResource, error) {
	if _, err := ocistorage.Digest(name); err != nil {
		return nil, outcome.Stall(fleet.ReasonInvalidBundle, err)
	}
	sec := &corev1.Secret{}
	gctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if err := r.APIReader.Get(gctx, client.ObjectKeyFromObject(bd), sec); err != nil {
		return nil, fmt.Errorf("reading the OCI storage Secret %s/%s of content %s: %w", bd.Namespace, bd.Name, name, err)
	}
	o, err := ocistorage.FromSecret(sec)
	if err != nil {
		return nil, outcome.Stall(fleet.ReasonInvalidOCIStorage, err)
	}
	pctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	raw, err := o.Pull(pctx, nil, name, content.MaxSize)
	if errors.Is(err, ocistorage.ErrTooLarge) {
		return nil, outcome.Stall(fleet.ReasonInvalidBundle, err)
	}
	if err != nil {
		return nil, err
	}
	f, err := content.Unmarshal(raw)
	if err != nil {
		return nil, outcome.Stall(fleet.ReasonInvalidBundle, err)
	}
	return f, nil
}
