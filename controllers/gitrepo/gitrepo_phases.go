package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

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
	"github.com/gitfleet/fleet/internal/gitfetch"
)

// pollJitter varies poll intervals by up to ±10%, so repos created together
// do not poll together forever.
const pollJitter = 0.1

// scope is what one reconcile works on.
type scope struct {
	repo   *fleet.GitRepo
	before *fleet.GitRepo
	state  *repoState
	now    time.Time
}

// repoState is what the controller remembers of a GitRepo between
// reconciles, in memory: a restart polls and syncs every GitRepo once.
// Reconciles of one GitRepo never run at once, so it needs no lock.
type repoState struct {
	// polled is set once the remote was asked for its latest commit.
	polled bool
	// polledGeneration is the GitRepo generation of the last poll.
	polledGeneration int64
	// nextPoll is when polling is due again.
	nextPoll time.Time
	// retry asks for a poll at once: the last one failed transiently.
	retry bool
	// webhookCommit is the status.webhookCommit already acted on.
	webhookCommit string
	// latest is the commit the remote pointed to at the last poll.
	latest string
	// pollErr is the error of the last poll, nil when it succeeded.
	pollErr error

	// synced is set once a sync succeeded or failed for good; syncedCommit and
	// syncedGeneration are its commit and GitRepo generation.
	synced           bool
	syncedCommit     string
	syncedGeneration int64
	// syncErr is the error of the last sync, nil when it succeeded.
	syncErr error
}

// fetchError marks a sync error from fetching, as opposed to reading or
// writing bundles.
type fetchError struct{ err error }

func (e *fetchError) Error() string { return e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

// pollDue says whether the remote must be asked for its latest commit now.
func pollDue(now time.Time, st *repoState, repo *fleet.GitRepo) bool {
	switch {
	case !st.polled, st.retry, repo.Generation != st.polledGeneration:
		return true
	case repo.Status.WebhookCommit != "" && repo.Status.WebhookCommit != st.webhookCommit:
		return true
	case repo.Spec.DisablePolling:
		return false
	}
	return !now.Before(st.nextPoll)
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

// jitter varies d by up to ±pollJitter; f is a random number in [0, 1).
func jitter(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * (1 - pollJitter + 2*pollJitter*f))
}

// reconcileGit polls when due and syncs when the commit or the spec changed.
// Nothing already deployed is deleted unless a sync read every bundle.
func (r *Reconciler) reconcileGit(ctx context.Context, s *scope) error {
	st, repo := s.state, s.repo
	if !pollDue(s.now, st, repo) {
		return nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("gitRepo", klog.KObj(repo))
	st.polled, st.polledGeneration, st.retry = true, repo.Generation, false
	st.webhookCommit = repo.Status.WebhookCommit
	st.nextPoll = s.now.Add(jitter(pollInterval(repo), rand.Float64()))

	o, err := r.fetchOptions(ctx, repo)
	if err == nil {
		st.latest, err = r.Fetcher.LatestCommit(ctx, o)
	}
	st.pollErr = err
	if err != nil {
		st.retry = !isPermanent(err)
		return err
	}
	if !syncNeeded(st, repo, st.latest) {
		return nil
	}

	ctx, cancel := context.WithTimeout(ctx, orDefault(r.SyncTimeout, DefaultSyncTimeout))
	defer cancel()
	n, err := r.sync(ctx, repo, o, st.latest)
	st.syncErr = err
	if err != nil && !isPermanent(err) {
		st.retry = true
		return err
	}
	st.synced, st.syncedCommit, st.syncedGeneration = true, st.latest, repo.Generation
	if err != nil {
		return err
	}
	if repo.Status.Commit != st.latest {
		log.Info("Synced bundles", "commit", st.latest, "bundles", n)
	}
	repo.Status.Commit = st.latest
	repo.Status.ObservedGeneration = repo.Generation
	return nil
}

// sync checks out commit, reads its bundles and writes them; it returns how
// many there are.
func (r *Reconciler) sync(ctx context.Context, repo *fleet.GitRepo, o gitfetch.Options, commit string) (int, error) {
	dir, err := r.Fetcher.Checkout(ctx, o, commit)
	if err != nil {
		return 0, &fetchError{err: err}
	}
	ro, err := r.readOptions(ctx, repo, commit)
	if err != nil {
		return 0, err
	}
	bundles, err := bundlereader.Read(ctx, dir, repo.Spec.Paths, ro)
	if err != nil {
		return 0, fmt.Errorf("reading the bundles of commit %s: %w", shortSHA(commit), err)
	}
	if len(bundles) == 0 {
		// As `fleet apply` does: an empty read is a mistake (a wrong path, a
		// directory without fleet.yaml or manifests), not an order to delete
		// every Bundle of the GitRepo.
		paths := repo.Spec.Paths
		if len(paths) == 0 {
			paths = []string{"."}
		}
		return 0, userErrorf(ReasonInvalidBundle, "no bundle found in %s of commit %s: add a fleet.yaml or manifests",
			strings.Join(paths, ", "), shortSHA(commit))
	}
	if err := r.applyBundles(ctx, repo, bundles); err != nil {
		return 0, err
	}
	return len(bundles), nil
}

// fetchOptions are the git options of a GitRepo, with its credentials.
func (r *Reconciler) fetchOptions(ctx context.Context, repo *fleet.GitRepo) (gitfetch.Options, error) {
	o := gitfetch.Options{
		Key:                   cacheKey(repo),
		URL:                   repo.Spec.Repo,
		Branch:                repo.Spec.Branch,
		Revision:              repo.Spec.Revision,
		CABundle:              repo.Spec.CABundle,
		InsecureSkipTLSVerify: repo.Spec.InsecureSkipTLSverify,
	}
	if repo.Spec.ClientSecretName != "" {
		secret, err := r.secret(ctx, repo, repo.Spec.ClientSecretName, "clientSecretName")
		if err != nil {
			return o, err
		}
		o.Secret = secret
	}
	return o, nil
}

// readOptions are the bundlereader options of a GitRepo at commit.
func (r *Reconciler) readOptions(ctx context.Context, repo *fleet.GitRepo, commit string) (bundlereader.Options, error) {
	o := bundlereader.Options{
		Name:                repo.Name,
		Namespace:           repo.Namespace,
		Labels:              map[string]string{fleet.RepoLabel: repo.Name},
		Commit:              commit,
		TargetsFromRepo:     repo.Spec.Targets,
		TargetNamespace:     repo.Spec.TargetNamespace,
		ServiceAccount:      repo.Spec.ServiceAccount,
		KeepResources:       repo.Spec.KeepResources,
		DeleteNamespace:     repo.Spec.DeleteNamespace,
		CorrectDrift:        repo.Spec.CorrectDrift,
		ForceSyncGeneration: repo.Spec.ForceSyncGeneration,
	}
	if repo.Spec.HelmSecretName != "" {
		secret, err := r.secret(ctx, repo, repo.Spec.HelmSecretName, "helmSecretName")
		if err != nil {
			return o, err
		}
		o.HelmAuth = &bundlereader.HelmAuth{
			Username: string(secret.Data[corev1.BasicAuthUsernameKey]),
			Password: string(secret.Data[corev1.BasicAuthPasswordKey]),
			CABundle: secret.Data["cacerts"],
		}
	}
	return o, nil
}

func (r *Reconciler) secret(ctx context.Context, repo *fleet.GitRepo, name, field string) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: repo.Namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return nil, userErrorf(ReasonSecretMissing, "%s: Secret %s not found in namespace %s: create it or fix the name", field, name, repo.Namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s Secret %s: %w", field, name, err)
	}
	return secret, nil
}

// applyBundles creates or updates the bundles read from git, only where they
// changed, then deletes the repo's Bundles that are no longer produced.
func (r *Reconciler) applyBundles(ctx context.Context, repo *fleet.GitRepo, bundles []*fleet.Bundle) error {
	existing := &fleet.BundleList{}
	if err := r.Client.List(ctx, existing, client.InNamespace(repo.Namespace), client.MatchingLabels{fleet.RepoLabel: repo.Name}); err != nil {
		return fmt.Errorf("listing the bundles of GitRepo %s: %w", repo.Name, err)
	}
	current := map[string]*fleet.Bundle{}
	for i := range existing.Items {
		current[existing.Items[i].Name] = &existing.Items[i]
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
		if err := r.writeBundle(ctx, repo, b, current[b.Name]); err != nil {
			return err
		}
	}
	for name, b := range current {
		if produced[name] {
			continue
		}
		if err := r.Client.Delete(ctx, b); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting bundle %s, no longer in GitRepo %s: %w", name, repo.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Deleted a bundle no longer in git", "gitRepo", klog.KObj(repo), "bundle", name)
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
			return userErrorf(ReasonInvalidBundle, "bundle %s already exists in namespace %s and is not from this GitRepo: give the bundle another name (name: in its fleet.yaml)", want.Name, repo.Namespace)
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
		return fmt.Errorf("bundle %s was rejected by the API server: %w", name, err)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code == 413 {
		return userErrorf(ReasonInvalidBundle, "bundle %s is too large for the API server: split it, or leave files out with .fleetignore", name)
	}
	return fmt.Errorf("writing bundle %s: %w", name, err)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
