package helmop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/bundlereader"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/sourcepoll"
)

// scope is what one reconcile works on.
type scope struct {
	op     *fleet.HelmOp
	before *fleet.HelmOp
	state  *opState
	now    time.Time
}

// opState is what the controller remembers of a HelmOp between reconciles,
// in memory: most reconciles (its Bundle's status changed) are neither a
// poll nor a spec change, and must neither ask the repository again nor
// forget what the last resolution found. A restart resolves every HelmOp
// once. Reconciles of one HelmOp never run at once, so it needs no lock.
type opState struct {
	// poll is when the version was last resolved, and when a polling
	// HelmOp is due to be resolved again.
	poll sourcepoll.Poll
	// polled is set once a polling HelmOp was polled; pollErr is the error
	// of that last poll, nil when it succeeded, and latest what it found.
	polled  bool
	pollErr error
	latest  string
	// checked is set once the spec was checked; acceptErr is the error that
	// keeps the current spec from being applied, nil when it is.
	checked   bool
	acceptErr error
	// applied is the version last written or found in the Bundle: the
	// status read from the cache may not show it yet.
	applied string
	// appliedInput is the fingerprint of what the restrictions and
	// Policies made of the HelmOp when it was last resolved ("" after a
	// restart: unknown), so that a changed default or namespace selector is
	// written to the Bundle at once; rewrite is set from such a change until
	// the Bundle is written (a failed attempt waits for the next poll or
	// retry, not for every event).
	appliedInput string
	rewrite      bool
}

// polls says whether a HelmOp is polled for new versions: as in Fleet,
// when its pollingInterval is set and not 0 and its version is a
// constraint (or empty) rather than an exact version, and the chart is not
// a URL (which has no versions to choose from).
func polls(op *fleet.HelmOp) bool {
	p := op.Spec.PollingInterval
	if p == nil || p.Duration <= 0 || op.Spec.Helm == nil {
		return false
	}
	h := op.Spec.Helm
	if h.Repo == "" && !strings.HasPrefix(h.Chart, "oci://") {
		return false
	}
	return !isExactVersion(h.Version)
}

func isExactVersion(v string) bool {
	_, err := semver.StrictNewVersion(v)
	return err == nil
}

// pollingInterval is how often a polling HelmOp is resolved again, 0 for
// one that does not poll.
func pollingInterval(op *fleet.HelmOp) time.Duration {
	if !polls(op) {
		return 0
	}
	return op.Spec.PollingInterval.Duration
}

// reconcileChart runs the phases in order: apply the namespace's
// restrictions, check the spec, and when due resolve the version and, if it
// or the spec changed, write the Bundle. Each failure is recorded where the
// status looks for it; nothing already deployed is touched unless a new
// Bundle could be made whole.
func (r *Reconciler) reconcileChart(ctx context.Context, s *scope) error {
	st, op := s.state, s.op
	st.checked = true
	eff, err := r.restrict(ctx, op)
	if err == nil {
		err = validate(eff)
	}
	if err != nil {
		if outcome.IsStalling(err) {
			st.acceptErr = err
			// Resolve again as soon as the spec or restriction is fixed;
			// a polling HelmOp looks again at its next poll, not at once.
			st.poll.Hold(s.now, pollingInterval(op))
		}
		return err
	}
	input := fingerprint(eff)
	// A changed restriction or Policy (a default, a namespace selector)
	// is written to the Bundle at once, not at the next poll.
	inputChanged := st.appliedInput != "" && st.appliedInput != input
	st.appliedInput = input
	if inputChanged {
		st.rewrite = true
	}
	if !st.poll.Due(s.now, op.Generation, polls(op)) && !inputChanged {
		// What the last resolution found is in the status already.
		return nil
	}
	release, err := r.slots.Take(op.Namespace, r.Workers, "chart download slots")
	if err != nil {
		return err
	}
	defer release()
	st.poll.Start(s.now, op.Generation, pollingInterval(op))
	polling := polls(op)
	if polling {
		st.polled = true
		op.Status.LastPollingTime.Time = s.now
	}

	ctx, cancel := context.WithTimeout(ctx, orDefault(r.SyncTimeout, DefaultSyncTimeout))
	defer cancel()
	auth, err := r.helmAuth(ctx, eff)
	if err != nil {
		return r.fail(s, polling, err)
	}
	h := eff.Spec.Helm
	version, err := bundlereader.ResolveChartVersion(ctx, bundlereader.ChartSource{Repo: h.Repo, Chart: h.Chart, Version: h.Version}, auth, r.MaxDownloadBytes, r.dialer)
	if err != nil {
		// A refused destination shows the tenant one fixed message; its
		// detail goes to the manager's log.
		return r.fail(s, polling, egress.ForTenant(ctx, classify(err)))
	}
	st.latest, st.pollErr = version, nil
	have, err := r.haveBundle(ctx, op)
	if err != nil {
		return r.fail(s, false, err)
	}
	// A Bundle written in the other mode (ChartsInBundle changed) is
	// written again.
	if have && !writeNeeded(op, version) && !st.rewrite && r.sameMode(ctx, op) {
		st.acceptErr, st.applied = nil, version
		return nil
	}
	if err := r.writeBundle(ctx, eff, version, auth); err != nil {
		return r.fail(s, false, egress.ForTenant(ctx, err))
	}
	if op.Status.Version != version {
		ctrl.LoggerFrom(ctx).Info("Wrote the HelmOp's bundle", "helmOp", klog.KObj(op), "chart", h.Chart, "repo", h.Repo, "version", version)
	}
	op.Status.Version = version
	op.Status.ObservedGeneration = op.Generation
	st.acceptErr, st.applied, st.rewrite = nil, version, false
	return nil
}

// fail records the error of a resolution or write. A poll of a spec already
// applied reports it in Polled only: the deployed version stays, and
// Accepted keeps saying so. Otherwise it is what Accepted reports. A
// transient error asks for the next reconcile (after backoff) to try again.
func (r *Reconciler) fail(s *scope, polling bool, err error) error {
	st, op := s.state, s.op
	if polling {
		st.pollErr = err
	}
	if !polling || op.Status.ObservedGeneration != op.Generation || op.Status.Version == "" {
		st.acceptErr = err
	}
	return st.poll.Fail(err)
}

// writeNeeded says whether the Bundle must be written for version: the spec
// changed since the last write, or the version did.
func writeNeeded(op *fleet.HelmOp, version string) bool {
	return op.Status.ObservedGeneration != op.Generation || op.Status.Version != version
}

// classify gives the errors of resolving a version their HelmOp reasons;
// others keep theirs (a plain error is transient).
func classify(err error) error {
	switch {
	case errors.Is(err, bundlereader.ErrInvalidVersion):
		return outcome.Stall(fleet.ReasonInvalidVersion, err)
	case errors.Is(err, bundlereader.ErrVersionNotFound):
		return outcome.Stall(fleet.ReasonVersionNotFound, err)
	}
	return err
}

// validate checks the helm options of a HelmOp as Fleet does, naming what
// to fix: a chart repository URL with a chart name, an oci:// reference, or
// a chart URL; no valuesFiles (a HelmOp has no files); a name that fits a
// Bundle.
func validate(op *fleet.HelmOp) error {
	invalid := func(format string, args ...any) error {
		return outcome.Stallf(fleet.ReasonInvalidOptions, format, args...)
	}
	if len(op.Name) > names.MaxBundleNameLength {
		return invalid("the name %q is longer than %d characters, the most a Bundle's name may have: use a shorter name", op.Name, names.MaxBundleNameLength)
	}
	if err := checkReserved(op); err != nil {
		return invalid("%v", err)
	}
	h := op.Spec.Helm
	if h == nil || (h.Repo == "" && h.Chart == "") {
		return invalid("spec.helm must name a chart: helm.repo and helm.chart, an oci:// reference in helm.repo, or a chart URL in helm.chart")
	}
	if err := checkHelmSource(h.Repo, h.Chart, h.Version, "helm"); err != nil {
		return invalid("%v", err)
	}
	if len(h.ValuesFiles) > 0 {
		return invalid("helm.valuesFiles: a HelmOp has no files to read them from: put the values in helm.values")
	}
	for i, t := range op.Spec.Targets {
		if t.Helm == nil {
			continue
		}
		field := fmt.Sprintf("targets[%d].helm", i)
		if len(t.Helm.ValuesFiles) > 0 {
			return invalid("%s.valuesFiles: a HelmOp has no files to read them from: put the values in %s.values", field, field)
		}
		if t.Helm.Repo == "" && t.Helm.Chart == "" && t.Helm.Version == "" {
			continue
		}
		repo, chart, version := first(t.Helm.Repo, h.Repo), first(t.Helm.Chart, h.Chart), first(t.Helm.Version, h.Version)
		if err := checkHelmSource(repo, chart, version, field); err != nil {
			return invalid("%v", err)
		}
	}
	return nil
}

// checkHelmSource checks one combination of repo, chart and version.
func checkHelmSource(repo, chart, version, field string) error {
	switch {
	case repo != "":
		if err := checkURL(repo, field+".repo", "http", "https", "oci"); err != nil {
			return err
		}
		if strings.HasPrefix(repo, "oci://") {
			if chart != "" {
				return fmt.Errorf("%s.chart must be empty when %s.repo is an oci:// reference: the reference names the chart", field, field)
			}
			return nil
		}
		if chart == "" {
			return fmt.Errorf("%s.chart is empty: name the chart of repository %s to deploy", field, repo)
		}
		if strings.Contains(chart, "://") {
			return fmt.Errorf("%s.chart %q must be a chart name when %s.repo is set, not a URL", field, chart, field)
		}
	case strings.HasPrefix(chart, "oci://"):
		return checkURL(chart, field+".chart", "oci")
	default:
		if !strings.Contains(chart, "://") {
			return fmt.Errorf("%s.repo is empty and %s.chart %q is not a URL: a HelmOp has no files of its own; set %s.repo to the chart repository", field, field, chart, field)
		}
		if err := checkURL(chart, field+".chart", "http", "https"); err != nil {
			return err
		}
		if version != "" {
			return fmt.Errorf("%s.version must be empty when %s.chart is the URL of a packaged chart", field, field)
		}
	}
	return nil
}

func checkURL(raw, field string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s %q is not a URL: %v", field, raw, err)
	}
	if !slices.Contains(schemes, u.Scheme) || u.Host == "" {
		return fmt.Errorf("%s %q must be a %s URL with a host", field, raw, strings.Join(schemes, ", "))
	}
	return nil
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// chartURL is where the chart of a HelmOp comes from: the repository, or
// the chart's own URL.
func chartURL(h *fleet.HelmOptions) string {
	if h.Repo != "" {
		return h.Repo
	}
	return h.Chart
}

// helmAuth is how the manager reaches the HelmOp's repository: its TLS
// settings, and the helmSecretName credentials, which go to that one URL
// (and its host) only, never to another repository a target names.
func (r *Reconciler) helmAuth(ctx context.Context, op *fleet.HelmOp) (*bundlereader.HelmAuth, error) {
	auth := &bundlereader.HelmAuth{InsecureSkipVerify: op.Spec.InsecureSkipTLSverify}
	if op.Spec.HelmSecretName == "" {
		return auth, nil
	}
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: op.Namespace, Name: op.Spec.HelmSecretName}, secret)
	if apierrors.IsNotFound(err) {
		return nil, outcome.Stallf(fleet.ReasonSecretNotFound, "helmSecretName: Secret %s not found in namespace %s: create it or fix the name", op.Spec.HelmSecretName, op.Namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("reading helmSecretName Secret %s: %w", op.Spec.HelmSecretName, err)
	}
	auth.Username = string(secret.Data[corev1.BasicAuthUsernameKey])
	auth.Password = string(secret.Data[corev1.BasicAuthPasswordKey])
	auth.CABundle = secret.Data["cacerts"]
	re, err := bundlereader.CompileURLRegex(regexp.QuoteMeta(strings.TrimSuffix(chartURL(op.Spec.Helm), "/")) + "/?")
	if err != nil {
		return nil, err
	}
	auth.URLRegex = re
	return auth, nil
}

// writeBundle creates or updates the HelmOp's Bundle for version, where it
// differs: by default a Bundle without resources whose helmOpOptions tell
// the agents to download the chart themselves (agentBundle), as Fleet does;
// with ChartsInBundle the chart fetched by the manager, in the Bundle.
func (r *Reconciler) writeBundle(ctx context.Context, op *fleet.HelmOp, version string, auth *bundlereader.HelmAuth) error {
	labels := map[string]string{}
	for k, v := range op.Spec.Labels {
		labels[k] = v
	}
	labels[fleet.HelmOpLabel] = op.Name
	// The Bundle is handled by the manager of the HelmOp's shard.
	if shard, ok := op.Labels[fleet.ShardRefLabel]; ok {
		labels[fleet.ShardRefLabel] = shard
	}
	var want *fleet.Bundle
	if r.ChartsInBundle {
		spec := *op.Spec.BundleSpec.DeepCopy()
		spec.Helm.Version = version
		spec.HelmOpOptions = nil
		b, err := bundlereader.ReadRemoteChart(ctx, spec, bundlereader.Options{
			Name: op.Name, Namespace: op.Namespace, Labels: labels, HelmAuth: auth, MaxDownloadBytes: r.MaxDownloadBytes, Dialer: r.dialer,
		})
		if err != nil {
			return fmt.Errorf("reading chart %s %s: %w", chartURL(op.Spec.Helm), displayVersion(version), classify(err))
		}
		want = b
	} else {
		versions, err := r.targetVersions(ctx, op, auth)
		if err != nil {
			return err
		}
		want = agentBundle(op, version, versions, labels)
	}
	cur := &fleet.Bundle{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := controllerutil.SetControllerReference(op, want, r.Client.Scheme()); err != nil {
			return err
		}
		return wrapWrite(r.Client.Create(ctx, want), want.Name)
	case err != nil:
		return fmt.Errorf("reading bundle %s: %w", want.Name, err)
	}
	if err := checkOwned(cur, op); err != nil {
		return err
	}
	upd := cur.DeepCopy()
	upd.Spec = want.Spec
	upd.Labels = want.Labels
	if err := controllerutil.SetControllerReference(op, upd, r.Client.Scheme()); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(cur.Spec, upd.Spec) && equality.Semantic.DeepEqual(cur.Labels, upd.Labels) &&
		equality.Semantic.DeepEqual(cur.OwnerReferences, upd.OwnerReferences) {
		return nil
	}
	return wrapWrite(r.Client.Update(ctx, upd), want.Name)
}

// targetVersions resolves, for each target of op that names a chart of its
// own (helm.repo, helm.chart or helm.version), the exact version its
// agents download, as the HelmOp's own version is resolved: every cluster of
// a target gets the same version. The helmSecretName credentials go to the
// HelmOp's repository only (auth's URLRegex).
func (r *Reconciler) targetVersions(ctx context.Context, op *fleet.HelmOp, auth *bundlereader.HelmAuth) (map[int]string, error) {
	h := op.Spec.Helm
	if err := r.probeChartURL(ctx, bundlereader.ChartSource{Repo: h.Repo, Chart: h.Chart, Version: h.Version}); err != nil {
		return nil, err
	}
	out := map[int]string{}
	for i, t := range op.Spec.Targets {
		if t.Helm == nil || (t.Helm.Repo == "" && t.Helm.Chart == "" && t.Helm.Version == "") {
			continue
		}
		src := bundlereader.ChartSource{Repo: first(t.Helm.Repo, h.Repo), Chart: first(t.Helm.Chart, h.Chart), Version: first(t.Helm.Version, h.Version)}
		if err := r.probeChartURL(ctx, src); err != nil {
			return nil, fmt.Errorf("targets[%d] (%s): %w", i, t.Name, err)
		}
		v, err := bundlereader.ResolveChartVersion(ctx, src, auth, r.MaxDownloadBytes, r.dialer)
		if err != nil {
			return nil, fmt.Errorf("targets[%d] (%s): %w", i, t.Name, classify(err))
		}
		out[i] = v
	}
	return out, nil
}

// probeChartURL connects, under the manager's egress policy, to the host of
// a chart the manager reads nothing of when the agents download it: a chart
// URL (no version to resolve) or a chart in an OCI registry (an exact tag
// is not looked up). A HelmOp whose chart is at a refused address is
// refused as when the manager downloads the chart, with the same message.
// A chart repository's index was read to resolve the version.
func (r *Reconciler) probeChartURL(ctx context.Context, src bundlereader.ChartSource) error {
	raw := src.Chart
	switch {
	case strings.HasPrefix(src.Repo, "oci://"):
		raw = src.Repo
	case src.Repo != "" || !strings.Contains(src.Chart, "://"):
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return outcome.Stallf(fleet.ReasonInvalidOptions, "%q is not a URL: %v", raw, err)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443", "oci": "443"}[u.Scheme]
	}
	conn, err := r.dialer.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return egress.ForTenant(ctx, fmt.Errorf("reaching chart %s: %w", raw, err))
	}
	return conn.Close()
}

// agentBundle is the Bundle of a HelmOp whose agents download the chart,
// as Fleet writes it: the HelmOp's bundle spec without resources, helm.version
// the resolved version (and each target's chart its resolved version, from
// versions by target index), unnamed targets named target000, ... or the
// default target when there is none, and helmOpOptions carrying
// helmSecretName and insecureSkipTLSVerify.
func agentBundle(op *fleet.HelmOp, version string, versions map[int]string, labels map[string]string) *fleet.Bundle {
	spec := *op.Spec.BundleSpec.DeepCopy()
	spec.Resources, spec.ContentsID = nil, ""
	spec.Helm.Version = version
	for i := range spec.Targets {
		if spec.Targets[i].Name == "" {
			spec.Targets[i].Name = fmt.Sprintf("target%03d", i)
		}
		if v, ok := versions[i]; ok && v != "" {
			spec.Targets[i].Helm.Version = v
		}
	}
	if len(spec.Targets) == 0 {
		spec.Targets = []fleet.BundleTarget{bundlereader.DefaultTarget()}
	}
	spec.HelmOpOptions = &fleet.BundleHelmOptions{SecretName: op.Spec.HelmSecretName, InsecureSkipTLSverify: op.Spec.InsecureSkipTLSverify}
	b := &fleet.Bundle{Spec: spec}
	b.APIVersion, b.Kind = fleet.GroupVersion.String(), "Bundle"
	b.Name, b.Namespace, b.Labels = op.Name, op.Namespace, labels
	return b
}

// haveBundle says whether the HelmOp's Bundle exists; it fails when a
// Bundle of that name is someone else's.
func (r *Reconciler) haveBundle(ctx context.Context, op *fleet.HelmOp) (bool, error) {
	cur := &fleet.Bundle{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(op), cur)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, checkOwned(cur, op)
}

// sameMode tells whether the HelmOp's Bundle, as the cache has it, holds
// the chart (ChartsInBundle) or lets the agents download it, as this
// manager writes it now.
func (r *Reconciler) sameMode(ctx context.Context, op *fleet.HelmOp) bool {
	cur := &fleet.Bundle{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(op), cur); err != nil {
		return true
	}
	return (cur.Spec.HelmOpOptions == nil) == r.ChartsInBundle
}

// checkOwned refuses to take over a Bundle that another GitRepo or HelmOp
// made, as Fleet refuses it.
func checkOwned(b *fleet.Bundle, op *fleet.HelmOp) error {
	if b.Labels[fleet.HelmOpLabel] == op.Name {
		return nil
	}
	by := "is not from a HelmOp"
	if repo := b.Labels[fleet.RepoLabel]; repo != "" {
		by = "belongs to GitRepo " + repo
	}
	return outcome.Stallf(fleet.ReasonNotOwned, "bundle %s already exists in namespace %s and %s: give the HelmOp another name", b.Name, b.Namespace, by)
}

func wrapWrite(err error, name string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsInvalid(err):
		return outcome.Stallf(fleet.ReasonInvalidOptions, "bundle %s was rejected by the API server: %w", name, err)
	case apierrors.IsRequestEntityTooLargeError(err):
		return outcome.Stallf(fleet.ReasonInvalidBundle, "bundle %s is too large for the API server: use a smaller chart", name)
	}
	return fmt.Errorf("writing bundle %s: %w", name, err)
}

func displayVersion(v string) string {
	if v == "" {
		return "(no version)"
	}
	return v
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
