package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/bundlereader"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/gitshare"
	"github.com/gitfleet/fleet/internal/metrics"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/sourcepoll"
)

// scope is what one reconcile works on.
type scope struct {
	repo   *fleet.GitRepo
	before *fleet.GitRepo
	state  *repoState
	now    time.Time
	// Filled by the phases, in order.
	// eff is the GitRepo with the defaults of its namespace's
	// GitRepoRestrictions and Policies filled in: what is fetched and read.
	eff *fleet.GitRepo
	// restricted is eff and what the restrictions add to its Bundles;
	// input is a fingerprint of it (see restricted.fingerprint).
	restricted *restricted
	input      string
	opts       gitfetch.Options
	// want is the commit a webhook announced and no poll acted on yet.
	want string
	// renew says this poll is one of the interval (sourcepoll.Poll): the
	// answer of the last does not do again.
	renew bool
	// gate takes a git fetch slot around each call to the remote; busy
	// says it found none free.
	gate gitshare.Gate
	busy bool
	// polled is when this reconcile polled (asked the remote, or took its
	// group's answer), zero when it did not.
	polled time.Time
	dir    string
	// release ends the read of dir.
	release func()
	bundles []*fleet.Bundle
}

// repoState is what the controller remembers of a GitRepo between
// reconciles, in memory: a restart polls and syncs every GitRepo once.
// It is needed because most reconciles are not polls: a Bundle's status
// changing, or the status patch of the last reconcile, brings the GitRepo
// back long before its polling interval is over, and must neither ask the
// remote again nor forget what the last poll and sync found (the conditions
// are computed from it on every reconcile). Reconciles of one GitRepo never
// run at once, so it needs no lock.
type repoState struct {
	// poll is when the remote was asked for its latest commit, and when it
	// is next.
	poll sourcepoll.Poll
	// webhookCommit is the status.webhookCommit already acted on.
	webhookCommit string
	// latest is the commit the remote pointed to at the last poll.
	latest string
	// gitErr is the error of the git phases (asking the remote for its
	// latest commit, fetching it) of the last poll, nil when they succeeded:
	// it is what GitPolling reports.
	gitErr error

	// synced is set once a sync succeeded or stalled; syncedCommit and
	// syncedGeneration are its commit and GitRepo generation.
	synced           bool
	syncedCommit     string
	syncedGeneration int64
	// seenInput is the fingerprint of what the restrictions and Policies
	// made of the GitRepo when it was last looked at ("" after a restart:
	// unknown); resync is set from a change of it until the Bundles are
	// written, so that a changed default or namespace selector is synced
	// at once, and a failed attempt waits for the next poll or retry like
	// any other, not for every event.
	seenInput string
	resync    bool
	// restrictErr is set while the GitRepo breaks a GitRepoRestriction: it
	// is what Accepted reports, and nothing is fetched.
	restrictErr error
	// syncErr is the error of the last read and write of the bundles, nil
	// when they succeeded: with a stalling gitErr, it is what Accepted
	// reports.
	syncErr error
	// warnings are what the last successful read of the bundles warned
	// about its fleet.yaml files; warningsRead says there was such a read
	// since the manager started (before it, the Warning condition in the
	// status is left as it is).
	warnings     []string
	warningsRead bool
	// secrets are the Secrets the GitRepo read last (see getSecret).
	secrets secretMemo
}

// pollMark is what a poll changes in a repoState before it asks the
// remote: a poll that could not ask (no git fetch slot free) is undone.
type pollMark struct {
	poll          sourcepoll.Poll
	webhookCommit string
	gitErr        error
	seenInput     string
	resync        bool
}

func (st *repoState) mark() pollMark {
	return pollMark{poll: st.poll, webhookCommit: st.webhookCommit, gitErr: st.gitErr, seenInput: st.seenInput, resync: st.resync}
}

// reset undoes the poll that made m.
func (st *repoState) reset(m pollMark) {
	st.poll, st.webhookCommit, st.gitErr, st.seenInput, st.resync = m.poll, m.webhookCommit, m.gitErr, m.seenInput, m.resync
}

// failGit records the error of a git phase: a transient one asks for the
// next reconcile (after backoff) to poll again.
func (st *repoState) failGit(err error) error {
	st.gitErr = err
	return st.poll.Fail(err)
}

// failSync records the error of reading or writing the bundles. A stalled
// commit is not read again until the commit or the spec changes; a
// transient error is retried with the next reconcile.
func (st *repoState) failSync(s *scope, err error) error {
	st.syncErr = err
	if outcome.IsStalling(err) {
		st.synced, st.syncedCommit, st.syncedGeneration, st.resync = true, st.latest, s.repo.Generation, false
	}
	return st.poll.Fail(err)
}

// pollDue says whether the remote must be asked for its latest commit now:
// when polling is due (see sourcepoll.Poll.Due), or the webhook announced a
// commit not acted on yet.
func pollDue(now time.Time, st *repoState, repo *fleet.GitRepo) bool {
	webhook := repo.Status.WebhookCommit != "" && repo.Status.WebhookCommit != st.webhookCommit
	return webhook || st.poll.Due(now, repo.Generation, !repo.Spec.DisablePolling)
}

// syncNeeded says whether the bundles must be read and written for latest.
// Without a sync since the manager started, the status tells what the last
// good sync was, so a restart does not re-read every repository.
func syncNeeded(st *repoState, repo *fleet.GitRepo, latest string) bool {
	if !st.synced && repo.Status.Commit != "" && meta.IsStatusConditionTrue(repo.Status.Conditions, fleet.ConditionAccepted) {
		st.synced, st.syncedCommit, st.syncedGeneration = true, repo.Status.Commit, repo.Status.ObservedGeneration
	}
	return !st.synced || latest != st.syncedCommit || repo.Generation != st.syncedGeneration
}

// pollInterval is spec.pollingInterval, default 15s.
func pollInterval(repo *fleet.GitRepo) time.Duration {
	if p := repo.Spec.PollingInterval; p != nil && p.Duration > 0 {
		return p.Duration
	}
	return fleet.DefaultPollingInterval
}

// reconcileGit polls when due and syncs when the commit or the spec changed:
// the phases run in order and each records its error where the status looks
// for it (git errors in gitErr, bundle errors in syncErr). Nothing already
// deployed is deleted unless a sync read every bundle.
func (r *Reconciler) reconcileGit(ctx context.Context, s *scope) error {
	st, repo := s.state, s.repo
	eff, err := r.restrict(ctx, repo)
	if err != nil {
		if outcome.IsStalling(err) {
			// Not fetched, not deployed; the Bundles it has stay as they
			// are. A changed restriction or GitRepo brings it back.
			st.restrictErr = err
			st.poll.Hold(s.now, pollInterval(repo))
		}
		return err
	}
	st.restrictErr = nil
	s.eff, s.restricted, s.input = eff.repo, eff, eff.fingerprint()
	// A changed restriction or Policy (a default, a namespace selector)
	// is written to the Bundles at once, not at the next poll.
	inputChanged := st.seenInput != "" && st.seenInput != s.input
	// Woken: another GitRepo of its group found a new commit, which this
	// poll takes from the group without asking the remote.
	key := client.ObjectKeyFromObject(repo)
	_, woken := r.woken.LoadAndDelete(key)
	if !pollDue(s.now, st, repo) && !inputChanged && !woken {
		st.seenInput = s.input
		return nil
	}
	// The namespace's git fetch slots are taken only around calls to the
	// remote (fetchGate): a GitRepo that takes its group's answer and
	// files neither waits for one nor holds one while it syncs.
	s.gate = r.fetchGate(s, key)
	r.slotWaiters.taken(key)
	mark := st.mark()
	st.seenInput = s.input
	if inputChanged {
		st.resync = true
	}
	// A poll of the interval, not a retry or a spec change, must learn
	// something newer than the last. A wake is not one: the group's answer
	// that woke it is the news, though this GitRepo may have taken it in
	// the same flight already (renewing then asked the remote once more).
	s.renew = !woken && st.poll.Done && !st.poll.Retry && st.poll.Generation == repo.Generation
	st.poll.Start(s.now, repo.Generation, sourcepoll.Jittered(pollInterval(repo)))
	if repo.Status.WebhookCommit != st.webhookCommit {
		s.want = repo.Status.WebhookCommit
	}
	st.webhookCommit = repo.Status.WebhookCommit
	st.gitErr = nil

	// A refused destination shows the tenant one fixed message; its detail
	// goes to the manager's log.
	if err := r.poll(ctx, s); err != nil {
		if s.busy {
			// The namespace's slots are busy: the retry (in a second or
			// two, or as a slot is given back) polls for the same
			// reasons, the wake and the changed input kept, rather than
			// wait for the next interval.
			st.reset(mark)
			if woken {
				r.woken.Store(key, struct{}{})
			}
			return err
		}
		s.polled = s.now
		return st.failGit(egress.ForTenant(ctx, err))
	}
	s.polled = s.now
	if !syncNeeded(st, repo, st.latest) && !st.resync {
		return nil
	}

	ctx, cancel := context.WithTimeout(ctx, orDefault(r.SyncTimeout, DefaultSyncTimeout))
	defer cancel()
	if err := r.checkout(ctx, s); err != nil {
		if s.busy {
			// The commit is known, its files are not: the retry polls
			// again, answered by the group, and fetches it.
			st.poll.Retry = true
			return err
		}
		// Not marked synced, even when stalled: the commit is fetched again
		// at the next poll, so that GitPolling keeps reporting the failure.
		return st.failGit(egress.ForTenant(ctx, err))
	}
	defer s.release()
	// Where the contents go decides how large a bundle may be: the
	// registry is found before the bundles are read.
	reg, err := r.registryFor(ctx, st, repo)
	if err != nil {
		return st.failSync(s, err)
	}
	if err := r.readBundles(ctx, s, reg); err != nil {
		return st.failSync(s, egress.ForTenant(ctx, err))
	}
	if reg != nil {
		if err := r.storeContents(ctx, reg, s.bundles); err != nil {
			return st.failSync(s, egress.ForTenant(ctx, err))
		}
	}
	if err := r.applyBundles(ctx, repo, s.bundles); err != nil {
		return st.failSync(s, err)
	}
	st.syncErr = nil
	st.synced, st.syncedCommit, st.syncedGeneration, st.resync = true, st.latest, repo.Generation, false
	if repo.Status.Commit != st.latest {
		ctrl.LoggerFrom(ctx).Info("Synced bundles", "gitRepo", klog.KObj(repo), "commit", st.latest, "bundles", len(s.bundles))
	}
	repo.Status.Commit = st.latest
	repo.Status.ObservedGeneration = repo.Generation
	return nil
}

// poll asks the remote for the commit to deploy, with the GitRepo's
// credentials: the answer is shared with the GitRepos that follow the same
// repository with the same credentials, one question per polling interval,
// or per webhook announcement.
func (r *Reconciler) poll(ctx context.Context, s *scope) error {
	o, err := r.fetchOptions(ctx, s.state, s.eff)
	if err != nil {
		return err
	}
	s.opts = o
	start := time.Now()
	q := gitshare.Query{MaxAge: pollInterval(s.repo), Renew: s.renew, Want: s.want, Gate: s.gate}
	latest, err := r.Fetcher.LatestCommit(ctx, o, q)
	if s.busy {
		return err
	}
	s.state.latest = latest
	metrics.ObserveSince(metrics.FetchLatestCommit, s.repo.Namespace, start, err)
	return err
}

// checkout fetches the latest commit into the git cache.
func (r *Reconciler) checkout(ctx context.Context, s *scope) error {
	start := time.Now()
	dir, release, err := r.Fetcher.Checkout(ctx, s.opts, s.state.latest, s.gate)
	if s.busy {
		return err
	}
	metrics.ObserveSince(metrics.Checkout, s.repo.Namespace, start, err)
	s.dir, s.release = dir, release
	return err
}

// fetchGate takes a git fetch slot of the GitRepo key's namespace for each
// call to the remote the share makes on its behalf, and gives it back when
// the call is over, waking the next GitRepo of the namespace waiting for
// one. When the namespace holds its share of the slots, it puts key in line
// and marks s busy.
func (r *Reconciler) fetchGate(s *scope, key client.ObjectKey) gitshare.Gate {
	return func() (func(), error) {
		release, err := r.slots.Take(key.Namespace, r.Workers, "git fetch slots")
		if err != nil {
			s.busy = true
			r.slotWaiters.wait(key)
			return nil, err
		}
		return func() {
			release()
			if next, ok := r.slotWaiters.next(key.Namespace); ok {
				r.enqueue(next)
			}
		}, nil
	}
}

// readBundles reads the bundles of the checked-out commit.
func (r *Reconciler) readBundles(ctx context.Context, s *scope, reg *registry) error {
	repo, commit := s.eff, s.state.latest
	ro, err := r.readOptions(ctx, s.state, repo, commit)
	if err != nil {
		return err
	}
	r.sizeLimit(&ro, reg)
	ro.AllowedTargetNamespaceSelector = s.restricted.nsSelector
	var warnings []string
	ro.Warn = func(w bundlereader.Warning) { warnings = append(warnings, w.String()) }
	var bundles []*fleet.Bundle
	if len(repo.Spec.Bundles) > 0 {
		bundles, err = bundlereader.ReadDriven(ctx, s.dir, repo.Spec.Bundles, ro)
	} else {
		bundles, err = bundlereader.Read(ctx, s.dir, repo.Spec.Paths, ro)
	}
	if err != nil {
		return fmt.Errorf("reading the bundles of commit %s: %w", shortSHA(commit), err)
	}
	if len(bundles) == 0 {
		// As `fleet apply` does: an empty read is a mistake (a wrong path, a
		// directory without fleet.yaml or manifests), not an order to delete
		// every Bundle of the GitRepo.
		paths := repo.Spec.Paths
		if len(paths) == 0 {
			paths = []string{"."}
		}
		if len(repo.Spec.Bundles) > 0 {
			paths = nil
			for _, b := range repo.Spec.Bundles {
				paths = append(paths, b.Base)
			}
		}
		return outcome.Stallf(fleet.ReasonInvalidBundle, "no bundle found in %s of commit %s: add a fleet.yaml or manifests",
			strings.Join(paths, ", "), shortSHA(commit))
	}
	s.bundles = bundles
	s.state.warnings, s.state.warningsRead = warnings, true
	return nil
}

// fetchOptions are the git options of a GitRepo, with its credentials.
func (r *Reconciler) fetchOptions(ctx context.Context, st *repoState, repo *fleet.GitRepo) (gitfetch.Options, error) {
	o := gitfetch.Options{
		Key:                   cacheKey(repo),
		URL:                   repo.Spec.Repo,
		Branch:                repo.Spec.Branch,
		Revision:              repo.Spec.Revision,
		CABundle:              repo.Spec.CABundle,
		InsecureSkipTLSVerify: repo.Spec.InsecureSkipTLSverify,
	}
	if repo.Spec.ClientSecretName != "" {
		secret, err := r.secret(ctx, st, repo, repo.Spec.ClientSecretName, "clientSecretName")
		if err != nil {
			return o, err
		}
		o.Secret = secret
	} else {
		// As in Fleet: without clientSecretName, the gitcredential Secret of
		// the namespace is used when there is one; no credentials otherwise.
		secret, err := r.getSecret(ctx, st, client.ObjectKey{Namespace: repo.Namespace, Name: gitfetch.DefaultClientSecretName})
		switch {
		case err == nil:
			o.Secret = secret
		case !apierrors.IsNotFound(err):
			return o, fmt.Errorf("reading the %s Secret: %w", gitfetch.DefaultClientSecretName, err)
		}
	}
	if isSSH(repo.Spec.Repo) && (o.Secret == nil || len(o.Secret.Data[gitfetch.KnownHostsKey]) == 0) {
		// As in Fleet, host keys the Secret lacks come from the known-hosts
		// ConfigMap of the system namespace.
		cm := &corev1.ConfigMap{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.systemNamespace(), Name: gitfetch.KnownHostsConfigMap}, cm)
		switch {
		case err == nil:
			o.KnownHosts = []byte(cm.Data[gitfetch.KnownHostsKey])
		case !apierrors.IsNotFound(err):
			return o, fmt.Errorf("reading the %s ConfigMap: %w", gitfetch.KnownHostsConfigMap, err)
		}
	}
	return o, nil
}

// isSSH tells whether a repository URL is an SSH one (ssh:// or the scp-like
// user@host:path).
func isSSH(url string) bool {
	ep, err := transport.NewEndpoint(url)
	return err == nil && ep.Protocol == "ssh"
}

func (r *Reconciler) systemNamespace() string {
	if r.SystemNamespace == "" {
		return fleet.DefaultSystemNamespace
	}
	return r.SystemNamespace
}

// readOptions are the bundlereader options of a GitRepo at commit.
func (r *Reconciler) readOptions(ctx context.Context, st *repoState, repo *fleet.GitRepo, commit string) (bundlereader.Options, error) {
	o := bundlereader.Options{
		Name:                repo.Name,
		Namespace:           repo.Namespace,
		Labels:              bundleLabels(repo),
		Commit:              commit,
		TargetsFromRepo:     bundlereader.RepoTargets(repo.Spec.Targets),
		TargetNamespace:     repo.Spec.TargetNamespace,
		ServiceAccount:      repo.Spec.ServiceAccount,
		KeepResources:       repo.Spec.KeepResources,
		DeleteNamespace:     repo.Spec.DeleteNamespace,
		CorrectDrift:        repo.Spec.CorrectDrift,
		ForceSyncGeneration: repo.Spec.ForceSyncGeneration,
		MaxBundles:          orDefaultInt(r.MaxBundles, DefaultMaxBundles),
		Dialer:              r.dialer,
	}
	if repo.Spec.HelmSecretName != "" {
		secret, err := r.secret(ctx, st, repo, repo.Spec.HelmSecretName, "helmSecretName")
		if err != nil {
			return o, err
		}
		o.HelmAuth = &bundlereader.HelmAuth{
			Username: string(secret.Data[corev1.BasicAuthUsernameKey]),
			Password: string(secret.Data[corev1.BasicAuthPasswordKey]),
			CABundle: secret.Data["cacerts"],
		}
		// Without helmRepoURLRegex the credentials go to no host: the
		// fleet.yaml files of the repository choose the chart hosts.
		if expr := repo.Spec.HelmRepoURLRegex; expr != "" {
			re, err := bundlereader.CompileURLRegex(expr)
			if err != nil {
				return o, outcome.Stallf(fleet.ReasonInvalidOptions, "helmRepoURLRegex %q is not a regular expression: %v", expr, err)
			}
			o.HelmAuth.URLRegex = re
		}
	}
	return o, nil
}

// secret reads the Secret name of the GitRepo's namespace, which its spec
// names in field: a Stalling error when it is missing.
func (r *Reconciler) secret(ctx context.Context, st *repoState, repo *fleet.GitRepo, name, field string) (*corev1.Secret, error) {
	secret, err := r.getSecret(ctx, st, client.ObjectKey{Namespace: repo.Namespace, Name: name})
	if apierrors.IsNotFound(err) {
		return nil, outcome.Stallf(fleet.ReasonSecretNotFound, "%s: Secret %s not found in namespace %s: create it or fix the name", field, name, repo.Namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s Secret %s: %w", field, name, err)
	}
	return secret, nil
}

// applyBundles creates or updates the bundles read from git, only where they
// changed, then deletes the repo's Bundles that are no longer produced.
func (r *Reconciler) applyBundles(ctx context.Context, repo *fleet.GitRepo, bundles []*fleet.Bundle) error {
	existing, err := r.bundlesOf(repo)
	if err != nil {
		return err
	}
	current := map[string]*fleet.Bundle{}
	for i := range existing {
		current[existing[i].Name] = &existing[i]
	}
	produced := map[string]bool{}
	for _, b := range bundles {
		produced[b.Name] = true
		b.Namespace = repo.Namespace
		if repo.Spec.Paused {
			b.Spec.Paused = true
		}
		if err := controllerutil.SetControllerReference(repo, b, r.Client.Scheme()); err != nil {
			return err
		}
	}
	if err := r.writeBundles(ctx, repo, bundles, current); err != nil {
		return err
	}
	for name, b := range current {
		if produced[name] {
			continue
		}
		if err := r.Client.Delete(ctx, b); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting bundle %s, no longer in GitRepo %s: %w", name, repo.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Deleted a bundle no longer in git", "gitRepo", klog.KObj(repo), "bundle", name)
	}
	return nil
}

// bundleWriteParallelism is how many of a GitRepo's Bundles are written at
// once.
const bundleWriteParallelism = 16

// writeBundles writes bundles over current (by name) at once, not one after
// the other: a commit that changes many of them reaches their clusters in
// one round trip to the API server instead of one per Bundle. A GitRepo of
// one Bundle (one path of a shared repository, as often) writes it itself,
// without a goroutine to start and grow a stack for a single request. The
// error is the first in the bundles' order, as when written in turn.
func (r *Reconciler) writeBundles(ctx context.Context, repo *fleet.GitRepo, bundles []*fleet.Bundle, current map[string]*fleet.Bundle) error {
	if len(bundles) == 1 {
		return r.writeBundle(ctx, repo, bundles[0], current[bundles[0].Name])
	}
	errs := make([]error, len(bundles))
	sem := make(chan struct{}, bundleWriteParallelism)
	var wg sync.WaitGroup
	for i, b := range bundles {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = r.writeBundle(ctx, repo, b, current[b.Name])
		}()
	}
	wg.Wait()
	return firstError(errs)
}

// firstError is the first non-nil error of errs, nil when there is none.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// writeBundle creates want, or updates cur to it when they differ.
func (r *Reconciler) writeBundle(ctx context.Context, repo *fleet.GitRepo, want, cur *fleet.Bundle) error {
	if cur == nil {
		err := r.Client.Create(ctx, want)
		if !apierrors.IsAlreadyExists(err) {
			return wrapWrite(err, want.Name)
		}
		// Not in the cache yet, or another owner's.
		cur = &fleet.Bundle{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), cur); err != nil {
			return wrapWrite(err, want.Name)
		}
		if cur.Labels[fleet.RepoLabel] != repo.Name {
			return outcome.Stallf(fleet.ReasonInvalidBundle, "bundle %s already exists in namespace %s and is not from this GitRepo: give the bundle another name (name: in its fleet.yaml)", want.Name, repo.Namespace)
		}
	}
	if equality.Semantic.DeepEqual(cur.Spec, want.Spec) && equality.Semantic.DeepEqual(cur.Labels, want.Labels) &&
		metav1IsControlledBy(cur, repo) {
		return nil
	}
	upd := cur.DeepCopy()
	upd.Spec = want.Spec
	upd.Labels = want.Labels
	// Drop the reference to an earlier GitRepo of the same name, if any.
	refs := upd.OwnerReferences[:0]
	for _, ref := range upd.OwnerReferences {
		if ref.Kind != "GitRepo" || ref.UID == repo.UID {
			refs = append(refs, ref)
		}
	}
	upd.OwnerReferences = refs
	for k, v := range want.Annotations {
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		upd.Annotations[k] = v
	}
	if err := controllerutil.SetControllerReference(repo, upd, r.Client.Scheme()); err != nil {
		return err
	}
	return wrapWrite(r.Client.Update(ctx, upd), want.Name)
}

func metav1IsControlledBy(b *fleet.Bundle, repo *fleet.GitRepo) bool {
	for _, ref := range b.OwnerReferences {
		if ref.UID == repo.UID && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

func wrapWrite(err error, name string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsInvalid(err):
		return outcome.Stallf(fleet.ReasonInvalidBundle, "bundle %s was rejected by the API server: %w", name, err)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code == 413 {
		return outcome.Stallf(fleet.ReasonInvalidBundle, "bundle %s is too large for the API server: split it, or leave files out with .fleetignore", name)
	}
	return fmt.Errorf("writing bundle %s: %w", name, err)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func orDefaultInt(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}
