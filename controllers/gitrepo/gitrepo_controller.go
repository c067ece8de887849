package gitrepo

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/cacheindex"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/gitshare"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/sharding"
	"github.com/gitfleet/fleet/internal/sourcepoll"
	"github.com/gitfleet/fleet/internal/summary"
)

// DefaultSyncTimeout bounds one sync: fetch, read and write of the bundles.
const DefaultSyncTimeout = 10 * time.Minute

// DefaultMaxBundles is the most bundles one GitRepo may produce.
const DefaultMaxBundles = 1000

// Fetcher asks git remotes for commits and checks them out, sharing both
// among the GitRepos that follow one repository with the same credentials;
// *gitshare.Share is the implementation. Checkout's release ends the read
// of the directory it returned. The gates (Query.Gate, Checkout's gate) are
// asked before each call to the remote, and only then.
type Fetcher interface {
	LatestCommit(ctx context.Context, o gitfetch.Options, q gitshare.Query) (string, error)
	Checkout(ctx context.Context, o gitfetch.Options, commit string, gate gitshare.Gate) (dir string, release func(), err error)
	Remove(key string) error
}

// Reconciler turns each GitRepo into Bundles: it polls the repository, reads
// the bundles of each new commit and writes them, and rolls the Bundles'
// status up into the GitRepo's.
type Reconciler struct {
	Client client.Client
	// APIReader reads Secrets (clientSecretName or gitcredential,
	// helmSecretName, the OCI storage ones), the known-hosts ConfigMap and,
	// on delete, Bundles, bypassing the cache; default
	// mgr.GetAPIReader().
	APIReader client.Reader
	// SecretVersions, when set, tells whether a Secret changed since a
	// GitRepo last read it (the manager's metadata watch of Secrets,
	// *secretmeta.Watch): an unchanged one is not read again at every
	// poll. Each GitRepo keeps the Secrets it read itself, none other's.
	SecretVersions SecretVersions
	// Fetcher talks to git; default a gitshare.Share of a gitfetch.Fetcher
	// over CacheDir.
	Fetcher Fetcher
	// CacheDir holds the git caches, one object store per repository and
	// credentials (repos/) and the files of the commits being read
	// (trees/). The manager process locks it (a second one given the same
	// directory fails to start); default a new directory below the
	// system's temporary one, deleted when the manager stops.
	CacheDir string
	// TreeCacheBytes bounds the commits' files kept in CacheDir once read;
	// default gitshare.DefaultMaxTreeBytes.
	TreeCacheBytes int64
	// Workers is the number of GitRepos reconciled at once, and so the
	// number of git fetch slots; the GitRepos of one namespace hold at most
	// half of them (rounded up) at once, so one tenant's slow git server
	// cannot stall the others. A slot is held only while the remote is
	// called (an ls-remote, a fetch): a GitRepo whose group has its commit
	// already syncs without one.
	Workers int
	// AllowLocalRepos lets GitRepos name local paths and file:// URLs (for
	// demos and tests): they read whatever the manager can read.
	AllowLocalRepos bool
	// SystemNamespace holds the known-hosts ConfigMap (SSH host keys trusted
	// for every GitRepo); default fleet.DefaultSystemNamespace.
	SystemNamespace string
	// GitHubAPIURL is where installation tokens for GitHub App credentials
	// come from; default https://api.<repository host> (see gitfetch).
	GitHubAPIURL string
	// FetchTimeout bounds one git fetch; default gitfetch.DefaultFetchTimeout.
	FetchTimeout time.Duration
	// Egress is where git fetches, chart downloads and GitHub API calls
	// may connect; the zero value refuses egress's defaults (loopback,
	// link-local, ...). It holds for the default Fetcher and for charts.
	Egress egress.Policy
	// GitLimits bound each fetch and checkout; zero fields take gitfetch's
	// defaults.
	GitLimits gitfetch.Limits
	// MaxBundles is the most bundles one GitRepo may produce; default
	// DefaultMaxBundles.
	MaxBundles int
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// SyncTimeout bounds one sync; default DefaultSyncTimeout.
	SyncTimeout time.Duration
	// Recorder, when set, gets an event each time Accepted or GitPolling
	// fails with a new reason or recovers; default
	// mgr.GetEventRecorder("fleet-gitrepo").
	Recorder events.EventRecorder
	// Shard is the shard this manager serves: it handles only the GitRepos
	// labelled fleet.cattle.io/shard-ref with it, or, when empty, those
	// without the label (internal/sharding), and labels their Bundles alike.
	Shard string
	// OCIStorage is the manager-wide registry for bundle contents above its
	// threshold; GitRepos whose namespace has a registry of their own
	// (ociRegistrySecret, the ocistorage Secret) use theirs for every
	// bundle.
	OCIStorage ocistorage.Default

	// pushed are the contents known to be in a registry, by repository.
	pushed sync.Map
	// dialer makes every connection for a GitRepo, under Egress.
	dialer *egress.Dialer
	// deployments is the cache's index of BundleDeployments, with
	// fleet.RepoIndex: status.resources is computed from them.
	deployments toolscache.Indexer
	// bundles is the cache's index of Bundles, with bundleIndex: a
	// GitRepo's are found without matching the labels of every Bundle of
	// its namespace, at each of its reconciles.
	bundles toolscache.Indexer

	// repos is what the last poll and sync of each GitRepo found.
	repos sourcepoll.States[repoState]
	// slots are the git fetch slots, shared fairly among namespaces.
	slots sourcepoll.Slots
	// woken are the GitRepos whose group learnt a new commit from another
	// GitRepo's poll: they poll at once (answered from the group), and
	// wake enqueues them.
	woken sync.Map
	wake  chan event.GenericEvent
	// slotWaiters are the GitRepos waiting for a git fetch slot of their
	// namespace.
	slotWaiters slotWaiters
}

// RepoKey is the fleet.RepoIndex value of a BundleDeployment: "" when its
// Bundle was not built from a GitRepo.
func RepoKey(bd client.Object) string {
	return sourcepoll.DeploymentKey(bd, fleet.RepoLabel)
}

// SetupWithManager registers the controller: it watches GitRepos, the
// Bundles labelled with a GitRepo's name so their status is rolled up, and
// those Bundles' BundleDeployments (coalesced, as they change in bursts) for
// status.resources.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	var err error
	r.deployments, err = sourcepoll.IndexDeployments(mgr, fleet.RepoIndex, fleet.RepoLabel)
	if err != nil {
		return err
	}
	r.bundles, err = cacheindex.For(context.Background(), mgr.GetCache(), &fleet.Bundle{}, toolscache.Indexers{bundleIndex: cacheindex.KeyIndex(bundleKey)})
	if err != nil {
		return err
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Fetcher == nil {
		dir, release, err := cacheDir(r.CacheDir)
		if err != nil {
			return err
		}
		if err := mgr.Add(releaseOnStop(release)); err != nil {
			release()
			return err
		}
		r.CacheDir = dir
	}
	r.dialer = egress.NewDialer(r.Egress)
	r.wake = make(chan event.GenericEvent, 1024)
	if r.Fetcher == nil {
		r.Fetcher = &gitshare.Share{
			Changed: r.wakeUp,
			Source: &gitfetch.Fetcher{Dialer: r.dialer, CacheDir: filepath.Join(r.CacheDir, "repos"), AllowLocal: r.AllowLocalRepos,
				FetchTimeout: r.FetchTimeout, GitHubAPIURL: r.GitHubAPIURL, Limits: r.GitLimits},
			TreeDir:      filepath.Join(r.CacheDir, "trees"),
			MaxTreeBytes: r.TreeCacheBytes,
			Now:          r.Now,
		}
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("fleet-gitrepo")
	}
	b := ctrl.NewControllerManagedBy(mgr).For(&fleet.GitRepo{}, builder.WithPredicates(sharding.Predicate(r.Shard), predicate.Or(gitRepoChanged, sharding.RefChanged())))
	return sourcepoll.Watches(b, r.Client, fleet.RepoLabel, func() client.ObjectList { return &fleet.GitRepoList{} }).
		WatchesRawSource(source.Channel(r.wake, &handler.EnqueueRequestForObject{})).
		Named("gitrepo").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// wakeUp makes the GitRepos keys ("namespace/name") poll now: their group
// has a new commit. It never blocks: with the queue full, they poll at
// their interval as usual.
func (r *Reconciler) wakeUp(keys []string) {
	for _, k := range keys {
		ns, name, ok := strings.Cut(k, "/")
		if !ok {
			continue
		}
		key := client.ObjectKey{Namespace: ns, Name: name}
		r.woken.Store(key, struct{}{})
		r.enqueue(key)
	}
}

// enqueue reconciles the GitRepo key now, without blocking: with the
// queue full, it comes back at its retry or interval as usual.
func (r *Reconciler) enqueue(key client.ObjectKey) {
	select {
	case r.wake <- event.GenericEvent{Object: &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
	default:
	}
}

// gitRepoChanged lets through the GitRepo updates that matter: a spec change,
// a webhook announcing a commit, a deletion. Status updates written by this
// controller do not come back as work.
var gitRepoChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*fleet.GitRepo)
		n, ok2 := e.ObjectNew.(*fleet.GitRepo)
		if !ok1 || !ok2 {
			return true
		}
		return o.Generation != n.Generation || o.Status.WebhookCommit != n.Status.WebhookCommit || !n.DeletionTimestamp.IsZero()
	},
}

// Reconcile polls one GitRepo's repository, syncs its Bundles when the commit
// or the spec changed, and writes its status once. A GitRepo is polled: it
// comes back at its polling interval after a success and after a stalling
// error alike (a push to git may fix it), and with backoff after a transient
// one.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	repo := &fleet.GitRepo{}
	if found, err := r.repos.Load(ctx, r.Client, req.NamespacedName, repo, fleet.GitRepoFinalizer, r.Shard); !found || err != nil {
		return ctrl.Result{}, err
	}
	if !repo.DeletionTimestamp.IsZero() {
		r.woken.Delete(req.NamespacedName)
		return ctrl.Result{}, r.reconcileDelete(ctx, repo)
	}

	s := &scope{repo: repo, before: repo.DeepCopy(), state: r.repos.Get(req.NamespacedName), now: r.Now()}
	var err error
	defer func() { res, retErr = r.end(ctx, s, err) }()
	err = r.reconcileGit(ctx, s)
	return res, retErr
}

// statusEvents are the conditions of a GitRepo whose changes are news.
var statusEvents = []outcome.Watch{{Condition: fleet.ConditionGitPolling, Action: "Poll"}, {Condition: fleet.ConditionAccepted, Action: "Sync"}}

// end computes the status from what the poll and sync found, the Bundles
// and their deployments; outcome records the events of its changes, logs a
// stall that polling keeps from controller-runtime (once, when it is new),
// decides the result (the next poll, after a success and a stall alike) and
// writes the status once. A lost status write is retried, even after a
// stall.
func (r *Reconciler) end(ctx context.Context, s *scope, err error) (ctrl.Result, error) {
	bundles, lerr := r.bundlesOf(s.repo)
	if lerr != nil {
		return ctrl.Result{}, lerr
	}
	bds, lerr := cacheindex.Objects[fleet.BundleDeployment](r.deployments, fleet.RepoIndex, s.repo.Namespace+"/"+s.repo.Name)
	if lerr != nil {
		return ctrl.Result{}, fmt.Errorf("reading the BundleDeployments of GitRepo %s: %w", s.repo.Name, lerr)
	}
	setStatus(s.repo, s.state, bundles)
	s.repo.Status.Resources, s.repo.Status.ResourceCounts = summary.Resources(bds)
	s.repo.Status.PerClusterResourceCounts = summary.PerClusterCounts(bds)
	recordPoll(&s.before.Status, &s.repo.Status, s.polled)
	return outcome.Finish(ctx, r.Client, s.before, outcome.Input{Object: s.repo, Err: err, Recorder: r.Recorder,
		Poll: s.state.poll.Until(r.Now(), !s.repo.Spec.DisablePolling), Before: s.before.Status.Conditions, Events: statusEvents})
}

// reconcileDelete deletes every Bundle of the GitRepo and its git cache,
// then lets the GitRepo go.
func (r *Reconciler) reconcileDelete(ctx context.Context, repo *fleet.GitRepo) error {
	r.repos.Forget(client.ObjectKeyFromObject(repo))
	return sourcepoll.Finalize(ctx, r.Client, r.APIReader, repo, "GitRepo", fleet.GitRepoFinalizer, fleet.RepoLabel, func() error {
		if err := r.Fetcher.Remove(cacheKey(repo)); err != nil {
			return fmt.Errorf("removing the git cache of deleted GitRepo %s: %w", repo.Name, err)
		}
		return nil
	})
}

// bundleIndex indexes the cache's Bundles by bundleKey.
const bundleIndex = "gitrepo.bundles"

// bundleKey is "<namespace>/<GitRepo name>" of a Bundle made from a GitRepo
// (fleet.RepoLabel), "" for the others.
func bundleKey(b client.Object) string {
	if repo := b.GetLabels()[fleet.RepoLabel]; repo != "" {
		return b.GetNamespace() + "/" + repo
	}
	return ""
}

// bundlesOf returns copies of the Bundles of repo (those of its namespace
// labelled with its name), as the cache holds them.
func (r *Reconciler) bundlesOf(repo *fleet.GitRepo) ([]fleet.Bundle, error) {
	cached, err := cacheindex.Objects[fleet.Bundle](r.bundles, bundleIndex, repo.Namespace+"/"+repo.Name)
	if err != nil {
		return nil, fmt.Errorf("listing the bundles of GitRepo %s: %w", repo.Name, err)
	}
	out := make([]fleet.Bundle, len(cached))
	for i, b := range cached {
		b.DeepCopyInto(&out[i])
	}
	return out, nil
}

func cacheKey(repo *fleet.GitRepo) string {
	return repo.Namespace + "/" + repo.Name
}
