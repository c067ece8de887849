package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/agentbundle"
	"github.com/gitfleet/fleet/controllers/bundle"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/controllers/cluster"
	"github.com/gitfleet/fleet/controllers/clustergroup"
	"github.com/gitfleet/fleet/controllers/clusterimport"
	"github.com/gitfleet/fleet/controllers/clusterregistration"
	"github.com/gitfleet/fleet/controllers/clusterregistrationtoken"
	"github.com/gitfleet/fleet/controllers/content"
	"github.com/gitfleet/fleet/controllers/downstreamresource"
	"github.com/gitfleet/fleet/controllers/gitrepo"
	"github.com/gitfleet/fleet/controllers/gitrepo/webhook"
	"github.com/gitfleet/fleet/controllers/helmop"
	"github.com/gitfleet/fleet/controllers/localcluster"
	"github.com/gitfleet/fleet/controllers/manageraddress"
	"github.com/gitfleet/fleet/controllers/notification"
	"github.com/gitfleet/fleet/controllers/schedule"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/dashboard"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/enqueue"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/intern"
	"github.com/gitfleet/fleet/internal/metrics"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/internal/scheme"
	"github.com/gitfleet/fleet/internal/secretmeta"
	"github.com/gitfleet/fleet/internal/sharding"
)

// DefaultWorkers is the number of concurrent reconciles per controller.
const DefaultWorkers = 32

// DefaultRegistrationWorkers is the number of registrations granted at once.
// A grant is a short chain of API round trips rather than work for the
// manager, so when many clusters register together, more in flight means
// less waiting.
const DefaultRegistrationWorkers = 128

// DefaultCredentialLifetime is how long an agent credential is valid; agents
// renew theirs before it ends (see agent/upstream).
const DefaultCredentialLifetime = clusterregistration.DefaultCredentialLifetime

// Options configure the reconcilers.
type Options struct {
	// SystemNamespace is where the manager runs (default fleet-system).
	SystemNamespace string
	// APIServerURL and APIServerCA tell agents how to reach this API server.
	APIServerURL string
	APIServerCA  []byte
	// Workers is the number of concurrent reconciles per controller.
	Workers int
	// RegistrationWorkers is the number of registrations granted at once.
	RegistrationWorkers int
	// CredentialLifetime is how long an agent credential is valid.
	CredentialLifetime time.Duration
	// CredentialRenewAfter is how old an agent's newest token gets before
	// the manager issues the next one (default half CredentialLifetime).
	CredentialRenewAfter time.Duration
	// ContentGrace is how long an unreferenced Content is kept.
	ContentGrace time.Duration
	// GitCacheDir holds the git caches (default below the temp directory).
	GitCacheDir string
	// GitWorkers bounds concurrent git fetches (default 4); one namespace
	// holds at most half of them.
	GitWorkers int
	// GitHubAPIURL is the GitHub API that mints installation tokens for
	// GitRepos with GitHub App credentials; default, as in Fleet,
	// https://api.<repository host>. Set it for a GitHub Enterprise Server
	// (https://HOST/api/v3).
	GitHubAPIURL string
	// AllowLocalRepos lets GitRepos name local paths and file:// URLs, which
	// read whatever the manager can (other GitRepos' caches): demos only.
	AllowLocalRepos bool
	// GitFetchTimeout bounds one git fetch (default 2m).
	GitFetchTimeout time.Duration
	// Egress is where the manager may connect for a tenant: git
	// repositories, chart repositories, registries, chart URLs and
	// dependencies, HelmOp repositories, the GitHub API. The zero value
	// refuses loopback, link-local (cloud metadata), unspecified, multicast
	// and broadcast addresses (see internal/egress).
	Egress egress.Policy
	// MaxBundlesPerGitRepo bounds the bundles of one GitRepo (default 1000).
	MaxBundlesPerGitRepo int
	// OCIStorageSecret names an OCI storage Secret in SystemNamespace: the
	// manager-wide registry, to which bundle contents larger than
	// OCIStorageThreshold (default ocistorage.DefaultThreshold) go, below
	// one repository prefix per namespace, when their GitRepo's namespace
	// has no registry of its own. Unset: contents without one stay in etcd.
	OCIStorageSecret    string
	OCIStorageThreshold int
	// OCIStorageMaxBytes is the largest bundle (its resources,
	// uncompressed) read when its content goes to a registry, any
	// registry; default ocistorage.DefaultMaxBytes. Bundles that land in
	// etcd keep its limit (bundlereader.DefaultMaxResourceBytes).
	OCIStorageMaxBytes int
	// HelmOpChartsInBundle makes the manager download HelmOps' charts into
	// their Bundles (etcd) instead of letting each agent download its
	// chart (Fleet's behaviour, the default): for clusters that can reach
	// the manager but not the chart repositories.
	HelmOpChartsInBundle bool
	// GitLimits bound each git fetch and checkout (pack size, object count,
	// file and commit sizes, path depth and length); zero fields take
	// gitfetch's defaults.
	GitLimits gitfetch.Limits
	// WebhookAddr serves git push webhooks when set (e.g. ":8082").
	WebhookAddr string
	// DashboardAddr serves the read-only web dashboard when set (e.g.
	// ":8443"): every request's bearer token is checked with a TokenReview
	// and each object shown only to users a SubjectAccessReview allows to
	// list it.
	DashboardAddr string
	// WebhookSecret, when set, is required of webhook calls for GitRepos
	// that name no webhookSecret of their own.
	WebhookSecret []byte
	// AgentImage is the agent image installed into imported clusters and,
	// with AgentBundles, offered to every registered cluster.
	AgentImage string
	// AgentTLSMode is how agents installed by the manager trust its API
	// server: strict (the default: only APIServerCA, or the system's store
	// when it is empty) or system-store (the system's store as well).
	AgentTLSMode string
	// AgentGarbageCollectionInterval is how often those agents look for
	// Helm releases no BundleDeployment asks for (0: the agent's default).
	AgentGarbageCollectionInterval time.Duration
	// AgentImagePullSecrets name Secrets of SystemNamespace that installs
	// copy into each agent's namespace and pull the agent image with.
	AgentImagePullSecrets []string
	// PerObjectMetrics serves Fleet's per-object metrics (fleet_bundle_state
	// and the rest of internal/metrics' PerObject), at most
	// PerObjectMetricsMaxSeries series (default 10000); off by default.
	PerObjectMetrics          bool
	PerObjectMetricsMaxSeries int
	// AgentBundles keeps an agent Bundle per registered Cluster, through
	// which every agent gets its Cluster's agent settings and AgentImage
	// (controllers/agentbundle); imported clusters then get only their
	// first install and repairs through their kubeconfig.
	AgentBundles bool
	// AgentMaxUnavailable bounds the clusters of a namespace whose agent
	// moves to a new image at once (a number or a share; default 10%).
	AgentMaxUnavailable *intstr.IntOrString
	// ImportStaleAfter: an imported cluster whose agent has not checked in
	// for this long gets its agent reinstalled (default 15m).
	ImportStaleAfter time.Duration
	// MaxConcurrentInstalls caps agent installs into imported clusters.
	MaxConcurrentInstalls int
	// ClusterOfflineAfter: a Cluster whose agent has not checked in for this
	// long is shown Offline (default 45m; keep it above the agents'
	// check-in interval).
	ClusterOfflineAfter time.Duration
	// DisableLocalCluster leaves out the manager's own cluster: without it
	// (the default, as in Fleet) the manager keeps the Cluster local in
	// fleet-local, installs its agent into the cluster it runs in, and keeps
	// the ClusterGroup default there selecting it (controllers/localcluster).
	DisableLocalCluster bool
	// KubeconfigSecretNamespaces are the namespaces from which a Cluster of
	// another namespace may take its kubeconfig Secret
	// (spec.kubeConfigSecretNamespace); default none.
	KubeconfigSecretNamespaces []string
	// CAPIClusterSelector and CAPINamespaceSelector, when set, switch
	// Cluster API enrollment to opt-in: only Cluster API Clusters matching
	// the first, in namespaces matching the second, are enrolled (see
	// capi.Reconciler).
	CAPIClusterSelector   labels.Selector
	CAPINamespaceSelector labels.Selector
	// CAPIClusterClassGroups keeps a ClusterGroup per ClusterClass, as
	// Fleet's Cluster API add-on provider does (capi.Reconciler.ClassGroups).
	CAPIClusterClassGroups bool
	// CAPIInstallCheckInterval is how often a manager started without
	// Cluster API looks for it (default 30s).
	CAPIInstallCheckInterval time.Duration
	// Events bound the events the manager records: a burst per object, then
	// one per interval, and a cap over all objects (internal/metrics;
	// defaults 5, 5m, 10/s).
	Events metrics.LimiterOptions
	// DisableNotifications turns off the Notification controller, which
	// tells the destinations tenants configure (webhooks, chat, commit
	// statuses) about their rollouts; on by default.
	DisableNotifications bool
	// ShardID is the shard this manager serves (internal/sharding): set,
	// it handles only the GitRepos, HelmOps, Bundles and BundleDeployments
	// labelled fleet.cattle.io/shard-ref with it, caches nothing else of
	// those kinds, and runs none of the reconcilers that belong to no shard
	// (Clusters, registration, imports, Cluster API); empty, the default
	// shard, it handles the unlabelled ones and all of that.
	ShardID string
}

// SystemRegistrationNamespace is where credential secrets live.
func (o Options) SystemRegistrationNamespace() string {
	return names.SystemRegistrationNamespace(o.systemNamespace())
}

// AgentNamespace is where the agents' ServiceAccounts live.
func (o Options) AgentNamespace() string {
	return names.AgentIdentityNamespace(o.systemNamespace())
}

func (o Options) systemNamespace() string {
	if o.SystemNamespace == "" {
		return fleet.DefaultSystemNamespace
	}
	return o.SystemNamespace
}

// Scheme holds every type the manager reads or writes.
func Scheme() *runtime.Scheme {
	return scheme.New(capi.AddToScheme)
}

// CacheOptions are the manager cache's options. Objects are kept without
// their managedFields, which no controller reads: at thousands of clusters
// they were a large part of the memory. The strings that repeat across
// objects (labels, namespaces, deploymentIDs, conditions) are interned
// (internal/intern): a third of each cached BundleDeployment.
//
// Of Leases it holds only the agents' check-ins (internal/checkin).
//
// Of Secrets it holds only those the manager writes in the namespaces it
// owns: its system namespace and the registration namespace (those labelled
// fleet.cattle.io/managed), and the local cluster's Secret in fleet-local,
// by name. A label is no trust boundary: whoever may write Secrets in a
// namespace may set it, and a cache of every labelled Secret held whatever
// tenants put there. The manager's Secrets in other namespaces (registration
// token values in their token's namespace, agent credentials in cluster
// namespaces) and everybody else's are read uncached, by name, when needed;
// controllers that must hear of them watch their metadata, stripped
// (internal/secretmeta). A cached read of a Secret in any other namespace
// fails, rather than hold it.
func CacheOptions(o Options) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{fleet.ManagedLabel: "true"})
	secrets := map[string]cache.Config{
		fleet.LocalWorkspace: {LabelSelector: managed, FieldSelector: fields.OneTermEqualSelector("metadata.name", fleet.LocalClusterSecretName)},
	}
	for _, ns := range []string{o.systemNamespace(), o.SystemRegistrationNamespace()} {
		secrets[ns] = cache.Config{LabelSelector: managed}
	}
	byObject := map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Namespaces: secrets},
		// The agents' check-in Leases only, by name.
		&coordinationv1.Lease{}: checkin.CacheByObject(),
	}
	// A sharded manager holds only its own shard's sources and deployments.
	maps.Copy(byObject, sharding.CacheByObject(o.ShardID))
	strip, pool := cache.TransformStripManagedFields(), intern.NewPool()
	return cache.Options{DefaultTransform: func(obj any) (any, error) {
		obj, err := strip(obj)
		if err != nil {
			return obj, err
		}
		return pool.Transform(obj)
	}, ByObject: byObject}
}

// Setup registers every reconciler with mgr: the namespaces the manager
// writes into first, then each entry of reconcilers, in order.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	if err := sharding.Validate(o.ShardID); err != nil {
		return err
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.RegistrationWorkers <= 0 {
		o.RegistrationWorkers = DefaultRegistrationWorkers
	}
	if o.GitWorkers <= 0 {
		o.GitWorkers = 4
	}
	if err := EnsureNamespaces(ctx, mgr.GetAPIReader(), mgr.GetClient(), o); err != nil {
		return err
	}
	// Every event goes through one limiter, keyed by the object it is about.
	limiter := metrics.NewLimiter(o.Events)
	d := &deps{mgr: mgr, o: o, limiter: limiter,
		recorder: func(name string) events.EventRecorder { return limiter.Recorder(mgr.GetEventRecorder(name)) }}
	// One metadata-only watch of Secrets serves every controller that must
	// hear of Secrets the cache does not hold.
	var err error
	if d.secrets, err = secretmeta.ForManager(mgr); err != nil {
		return err
	}
	for _, r := range reconcilers {
		if o.ShardID != "" && !r.sharded {
			continue
		}
		if err := r.setup(ctx, d); err != nil {
			return fmt.Errorf("setting up the %s: %w", r.name, err)
		}
	}
	return nil
}

// deps is what Setup gives each reconciler's setup function.
type deps struct {
	mgr ctrl.Manager
	o   Options
	// recorder is the event recorder of every reconciler that records
	// events: through the one limiter, never mgr.GetEventRecorder alone.
	recorder func(name string) events.EventRecorder
	limiter  *metrics.Limiter
	// secrets is the one metadata watch of Secrets.
	secrets *secretmeta.Watch
	// local is the manager's own cluster, for the import controller to
	// install its agent; nil with DisableLocalCluster.
	local *clusterimport.LocalCluster
}

// reconcilers are the manager's reconcilers, each with its setup function,
// in the order Setup registers them: a reconciler that relies on another's
// index or result comes after it (registration's spec.clientID index before
// import, the local cluster before import).
//
// A manager with a shard ID runs only the sharded ones, which handle the
// objects of its shard (see Options.ShardID); the manager of the default
// shard runs them all, as Fleet runs Cluster registration and agent
// management beside its default shard's controller only.
var reconcilers = []struct {
	name    string
	setup   func(context.Context, *deps) error
	sharded bool
}{
	{name: "registration token controller", setup: setupRegistrationToken},
	{name: "registration controller", setup: setupRegistration},
	{name: "gitrepo controller", setup: setupGitRepo, sharded: true},
	{name: "helmop controller", setup: setupHelmOp, sharded: true},
	{name: "git push webhook", setup: setupWebhook},
	{name: "local cluster controller", setup: setupLocalCluster},
	{name: "cluster import controller", setup: setupClusterImport},
	{name: "agent bundle controller", setup: setupAgentBundle},
	{name: "Cluster API controller", setup: setupCAPI},
	{name: "manager address controller", setup: setupManagerAddress},
	{name: "bundle controller", setup: setupBundle, sharded: true},
	{name: "downstream resource controller", setup: setupDownstreamResource},
	{name: "cluster controller", setup: setupCluster},
	{name: "cluster group controller", setup: setupClusterGroup},
	{name: "schedule controller", setup: setupSchedule},
	{name: "content controller", setup: setupContent},
	{name: "notification controller", setup: setupNotification, sharded: true},
	{name: "state metrics", setup: setupMetrics},
	{name: "dashboard", setup: setupDashboard},
}

func setupDownstreamResource(ctx context.Context, d *deps) error {
	return (&downstreamresource.Reconciler{
		Client:    d.mgr.GetClient(),
		APIReader: d.mgr.GetAPIReader(),
		Secrets:   d.secrets,
		Workers:   d.o.Workers,
	}).SetupWithManager(ctx, d.mgr)
}

func setupRegistrationToken(_ context.Context, d *deps) error {
	return (&clusterregistrationtoken.Reconciler{
		Client:                      d.mgr.GetClient(),
		Secrets:                     d.secrets,
		SystemRegistrationNamespace: d.o.SystemRegistrationNamespace(),
		APIServerURL:                d.o.APIServerURL,
		APIServerCA:                 d.o.APIServerCA,
		Workers:                     d.o.Workers,
	}).SetupWithManager(d.mgr)
}

func setupRegistration(ctx context.Context, d *deps) error {
	// The manager's cache is not started yet: write through a direct client.
	direct, err := client.New(d.mgr.GetConfig(), client.Options{Scheme: d.mgr.GetScheme(), Mapper: d.mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	if err := clusterregistration.EnsureSharedRoles(ctx, direct, d.o.AgentNamespace()); err != nil {
		return fmt.Errorf("creating the agents' ClusterRoles: %w", err)
	}
	return (&clusterregistration.Reconciler{
		Client:                      d.mgr.GetClient(),
		Secrets:                     d.secrets,
		SystemRegistrationNamespace: d.o.SystemRegistrationNamespace(),
		AgentNamespace:              d.o.AgentNamespace(),
		CredentialLifetime:          d.o.CredentialLifetime,
		CredentialRenewAfter:        d.o.CredentialRenewAfter,
		APIServerURL:                d.o.APIServerURL,
		APIServerCA:                 d.o.APIServerCA,
		Workers:                     d.o.RegistrationWorkers,
		Recorder:                    d.recorder("fleet-clusterregistration"),
	}).SetupWithManager(ctx, d.mgr)
}

func setupGitRepo(_ context.Context, d *deps) error {
	o := d.o
	return (&gitrepo.Reconciler{Client: d.mgr.GetClient(), APIReader: d.mgr.GetAPIReader(), SecretVersions: d.secrets, CacheDir: o.GitCacheDir, Workers: o.GitWorkers,
		AllowLocalRepos: o.AllowLocalRepos, FetchTimeout: o.GitFetchTimeout, MaxBundles: o.MaxBundlesPerGitRepo, GitLimits: o.GitLimits,
		SystemNamespace: o.systemNamespace(), GitHubAPIURL: o.GitHubAPIURL, Egress: o.Egress, Recorder: d.recorder("fleet-gitrepo"),
		Shard: o.ShardID, OCIStorage: o.ociStorage()}).SetupWithManager(d.mgr)
}

// ociStorage is the manager-wide OCI storage, if any.
func (o Options) ociStorage() ocistorage.Default {
	if o.OCIStorageSecret == "" {
		return ocistorage.Default{MaxBytes: o.OCIStorageMaxBytes}
	}
	return ocistorage.Default{Secret: types.NamespacedName{Namespace: o.systemNamespace(), Name: o.OCIStorageSecret},
		Threshold: o.OCIStorageThreshold, MaxBytes: o.OCIStorageMaxBytes}
}

// setupHelmOp: HelmOps download charts as GitRepos fetch git, as many at
// once.
func setupHelmOp(_ context.Context, d *deps) error {
	return (&helmop.Reconciler{Client: d.mgr.GetClient(), APIReader: d.mgr.GetAPIReader(), Workers: d.o.GitWorkers, Egress: d.o.Egress,
		Recorder: d.recorder("fleet-helmop"), Shard: d.o.ShardID, ChartsInBundle: d.o.HelmOpChartsInBundle}).SetupWithManager(d.mgr)
}

func setupWebhook(_ context.Context, d *deps) error {
	if d.o.WebhookAddr == "" {
		return nil
	}
	h := webhook.NewHandler(d.mgr.GetClient(), webhook.Options{SecretReader: d.mgr.GetAPIReader(), Secret: d.o.WebhookSecret})
	srv := &http.Server{Addr: d.o.WebhookAddr, Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
	return d.mgr.Add(&manager.Server{Name: "gitrepo-webhook", Server: srv})
}

// setupDashboard serves the dashboard from the manager's cache, to users
// authenticated and authorized by the API server.
func setupDashboard(_ context.Context, d *deps) error {
	if d.o.DashboardAddr == "" {
		return nil
	}
	cs, err := kubernetes.NewForConfig(d.mgr.GetConfig())
	if err != nil {
		return err
	}
	// Cluster API's Clusters are shown once the API server serves them.
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(d.mgr.GetConfig(), d.mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	s, err := dashboard.New(dashboard.Options{Cache: d.mgr.GetCache(), Authenticator: &dashboard.TokenReviewer{Client: cs},
		Authorizer: &dashboard.AccessReviewer{Client: cs}, Discovery: dc})
	if err != nil {
		return err
	}
	return d.mgr.Add(dashboard.Runnable{Server: s, Addr: d.o.DashboardAddr})
}

func setupClusterImport(ctx context.Context, d *deps) error {
	o := d.o
	return (&clusterimport.Reconciler{Client: d.mgr.GetClient(), APIServerURL: o.APIServerURL, APIServerCA: o.APIServerCA,
		AgentImage: o.AgentImage, AgentBundles: o.AgentBundles, StaleAfter: o.ImportStaleAfter, MaxConcurrentInstalls: o.MaxConcurrentInstalls,
		AgentTLSMode: o.AgentTLSMode, AgentGarbageCollectionInterval: o.AgentGarbageCollectionInterval,
		AgentImagePullSecrets: o.AgentImagePullSecrets, SystemNamespace: o.systemNamespace(),
		Workers: o.Workers, Secrets: d.secrets, SecretNamespaces: o.KubeconfigSecretNamespaces, Local: d.local,
		Recorder: d.recorder("fleet-clusterimport")}).SetupWithManager(ctx, d.mgr)
}

func setupAgentBundle(_ context.Context, d *deps) error {
	if !d.o.AgentBundles {
		return nil
	}
	return (&agentbundle.Reconciler{Client: d.mgr.GetClient(), Image: d.o.AgentImage, ImagePullSecrets: d.o.AgentImagePullSecrets,
		MaxUnavailable: d.o.AgentMaxUnavailable, Workers: d.o.Workers}).SetupWithManager(d.mgr)
}

// setupCAPI: Cluster API enrollment runs where Cluster API's Cluster kind
// is served; installed later, it is turned on when it appears.
func setupCAPI(ctx context.Context, d *deps) error {
	mgr, o := d.mgr, d.o
	setup := func(ctx context.Context) error {
		r := &capi.Reconciler{Client: mgr.GetClient(), Workers: o.Workers, Secrets: d.secrets, Recorder: d.recorder("fleet-capi"),
			ClusterSelector: o.CAPIClusterSelector, NamespaceSelector: o.CAPINamespaceSelector, StaleAfter: o.ImportStaleAfter,
			ClassGroups: o.CAPIClusterClassGroups}
		return r.SetupWithManager(ctx, mgr)
	}
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}, "v1beta2")
	if err == nil {
		return setup(ctx)
	}
	ctrl.LoggerFrom(ctx).Info("Cluster API enrollment waits for Cluster API: its v1beta2 Cluster kind is not served", "reason", err.Error())
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	return mgr.Add(&capi.WhenInstalled{Discovery: dc, Interval: o.CAPIInstallCheckInterval, Setup: func(ctx context.Context) error {
		if err := setup(ctx); err != nil {
			return fmt.Errorf("setting up the Cluster API controller: %w", err)
		}
		return nil
	}})
}

// setupManagerAddress: agents registered by token follow the manager's
// address.
func setupManagerAddress(_ context.Context, d *deps) error {
	if d.o.APIServerURL == "" {
		return nil
	}
	return (&manageraddress.Reconciler{Client: d.mgr.GetClient(), APIReader: d.mgr.GetAPIReader(), APIServerURL: d.o.APIServerURL,
		APIServerCA: d.o.APIServerCA, Workers: d.o.Workers}).SetupWithManager(d.mgr)
}

func setupBundle(ctx context.Context, d *deps) error {
	return (&bundle.Reconciler{Client: d.mgr.GetClient(), Workers: d.o.Workers, Recorder: d.recorder("fleet-bundle"),
		Shard: d.o.ShardID, OCIStorageSecret: d.o.ociStorage().Secret, Secrets: d.secrets}).SetupWithManager(ctx, d.mgr)
}

func setupCluster(_ context.Context, d *deps) error {
	return (&cluster.Reconciler{Client: d.mgr.GetClient(), Workers: d.o.Workers, OfflineAfter: d.o.ClusterOfflineAfter,
		AgentNamespace: d.o.AgentNamespace(), Recorder: d.recorder("fleet-cluster")}).SetupWithManager(d.mgr)
}

func setupClusterGroup(_ context.Context, d *deps) error {
	return (&clustergroup.Reconciler{Client: d.mgr.GetClient(), Workers: d.o.Workers, Recorder: d.recorder("fleet-clustergroup")}).SetupWithManager(d.mgr)
}

func setupSchedule(_ context.Context, d *deps) error {
	return (&schedule.Reconciler{Client: d.mgr.GetClient(), Workers: d.o.Workers, Recorder: d.recorder("fleet-schedule")}).SetupWithManager(d.mgr)
}

// setupNotification: rollout notifications, through the same outbound
// policy as every other connection made for a tenant. A sharded manager
// tells about the rollouts of its own shard's GitRepos and HelmOps (the
// ones its cache holds).
func setupNotification(ctx context.Context, d *deps) error {
	if d.o.DisableNotifications {
		return nil
	}
	return (&notification.Reconciler{Client: d.mgr.GetClient(), APIReader: d.mgr.GetAPIReader(), Egress: d.o.Egress, Secrets: d.secrets}).SetupWithManager(ctx, d.mgr)
}

func setupContent(ctx context.Context, d *deps) error {
	return (&content.Reconciler{Client: d.mgr.GetClient(), Workers: d.o.Workers, Grace: d.o.ContentGrace}).SetupWithManager(ctx, d.mgr)
}

// setupMetrics: the state gauges and events, on the leader, limited as the
// rest.
func setupMetrics(_ context.Context, d *deps) error {
	if d.o.PerObjectMetrics {
		if err := metrics.SetupPerObject(d.mgr, d.o.PerObjectMetricsMaxSeries); err != nil {
			return err
		}
	}
	return metrics.Setup(d.mgr, d.limiter, metrics.Recorders{
		"GitRepo": d.recorder("fleet-gitrepo"), "Bundle": d.recorder("fleet-bundle"), "Cluster": d.recorder("fleet-cluster"),
	})
}

// setupLocalCluster registers the controller that keeps the local Cluster
// (unless DisableLocalCluster) and keeps what the import controller needs
// to install its agent: the manager's own connection, which also tells the
// agent where the manager is (as Fleet's bootstrap takes the in-cluster
// address, not the one given to remote clusters).
func setupLocalCluster(_ context.Context, d *deps) error {
	if d.o.DisableLocalCluster {
		return nil
	}
	cfg := d.mgr.GetConfig()
	url := cfg.Host
	if !strings.Contains(url, "://") {
		url = "https://" + url
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return fmt.Errorf("reading the CA of the manager's own connection for the local cluster: %w", err)
		}
	}
	lc := &localcluster.Reconciler{Client: d.mgr.GetClient(), Namespace: fleet.LocalWorkspace, APIServerURL: url, APIServerCA: ca}
	if err := lc.SetupWithManager(d.mgr); err != nil {
		return err
	}
	d.local = &clusterimport.LocalCluster{
		Cluster: client.ObjectKey{Namespace: fleet.LocalWorkspace, Name: fleet.LocalClusterName},
		Secret:  client.ObjectKey{Namespace: fleet.LocalWorkspace, Name: fleet.LocalClusterSecretName},
		Config:  cfg,
	}
	return nil
}

// EnsureNamespaces creates the namespaces the manager writes into.
func EnsureNamespaces(ctx context.Context, r client.Reader, w client.Writer, o Options) error {
	for _, ns := range []string{o.systemNamespace(), o.SystemRegistrationNamespace(), fleet.DefaultWorkspace, fleet.LocalWorkspace} {
		err := r.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			err = w.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		}
		if err != nil {
			return fmt.Errorf("ensuring namespace %s: %w", ns, err)
		}
	}
	return nil
}

// RunOptions configure the manager process.
type RunOptions struct {
	Options
	MetricsAddr string
	ProbeAddr   string
	// PprofAddr serves Go's profiles when set (e.g. "127.0.0.1:6060").
	PprofAddr       string
	LeaderElect     bool
	LeaseDuration   time.Duration
	ShutdownTimeout time.Duration
}

// Run starts the manager and blocks until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o RunOptions) error {
	if err := sharding.Validate(o.ShardID); err != nil {
		return err
	}
	lease := o.LeaseDuration
	if lease == 0 {
		lease = 15 * time.Second
	}
	renew := lease * 2 / 3
	retry := lease / 7
	shutdown := o.ShutdownTimeout
	if shutdown == 0 {
		shutdown = 30 * time.Second
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        Scheme(),
		Controller:                    enqueue.ControllerDefaults(),
		Cache:                         CacheOptions(o.Options),
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              sharding.LeaderElectionID("fleet-manager.fleet.cattle.io", o.ShardID),
		LeaderElectionNamespace:       o.systemNamespace(),
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &lease,
		RenewDeadline:                 &renew,
		RetryPeriod:                   &retry,
		GracefulShutdownTimeout:       &shutdown,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	// Ready once the cache has synced: Setup has created the namespaces by
	// then, and the informers hold what the API server has. Every replica
	// starts its cache, so a replica waiting for the lease is ready too.
	if err := mgr.AddReadyzCheck("cache-synced", cacheSynced(mgr)); err != nil {
		return err
	}
	if err := Setup(ctx, mgr, o.Options); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// cacheSynced is a readiness check that passes once the manager's cache has
// started and synced its informers. It waits at most a second per request.
func cacheSynced(mgr ctrl.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the manager's cache has not synced yet")
		}
		return nil
	}
}
