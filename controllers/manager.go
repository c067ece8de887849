package controllers

import (
	"context"
	"errors"
	"fmt"
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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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
	"github.com/gitfleet/fleet/controllers/gitrepo"
	"github.com/gitfleet/fleet/controllers/helmop"
	"github.com/gitfleet/fleet/controllers/localcluster"
	"github.com/gitfleet/fleet/controllers/manageraddress"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/enqueue"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/metrics"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/secretmeta"
)

// DefaultWorkers is the number of concurrent reconciles per controller.
const DefaultWorkers = 32

// DefaultRegistrationWorkers is the number of registrations granted at once.
// A grant is a short chain of API round trips rather than work for the
// manager, so when many clusters register together, more in flight means
// less waiting.
const DefaultRegistrationWorkers = 128

// DefaultCredentialLifetime is how long an agent credential is valid; agents
// renew theirs before it ends (see agent/registration).
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
	// GitLimits bound each git fetch and checkout (pack size, object count,
	// file and commit sizes, path depth and length); zero fields take
	// gitfetch's defaults.
	GitLimits gitfetch.Limits
	// WebhookAddr serves git push webhooks when set (e.g. ":8082").
	WebhookAddr string
	// WebhookSecret, when set, is required of webhook calls for GitRepos
	// that name no webhookSecret of their own.
	WebhookSecret []byte
	// AgentImage is the agent image installed into imported clusters and,
	// with AgentBundles, offered to every registered cluster.
	AgentImage string
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
	// CAPIInstallCheckInterval is how often a manager started without
	// Cluster API looks for it (default 30s).
	CAPIInstallCheckInterval time.Duration
	// Events bound the events the manager records: a burst per object, then
	// one per interval, and a cap over all objects (internal/metrics;
	// defaults 5, 5m, 10/s).
	Events metrics.LimiterOptions
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
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := fleet.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := capi.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// CacheOptions are the manager cache's options. Objects are kept without
// their managedFields, which no controller reads: at thousands of clusters
// they were a large part of the memory.
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
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: secrets},
			// The agents' check-in Leases only, by name.
			&coordinationv1.Lease{}: checkin.CacheByObject(),
		},
	}
}

// Setup registers every reconciler with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.RegistrationWorkers <= 0 {
		o.RegistrationWorkers = DefaultRegistrationWorkers
	}
	if err := EnsureNamespaces(ctx, mgr.GetAPIReader(), mgr.GetClient(), o); err != nil {
		return err
	}
	// Every event goes through one limiter, keyed by the object it is about.
	limiter := metrics.NewLimiter(o.Events)
	recorder := func(name string) events.EventRecorder { return limiter.Recorder(mgr.GetEventRecorder(name)) }
	// One metadata-only watch of Secrets serves every controller that must
	// hear of Secrets the cache does not hold.
	secrets, err := secretmeta.ForManager(mgr)
	if err != nil {
		return err
	}
	token := &clusterregistrationtoken.Reconciler{
		Client:                      mgr.GetClient(),
		Secrets:                     secrets,
		SystemRegistrationNamespace: o.SystemRegistrationNamespace(),
		APIServerURL:                o.APIServerURL,
		APIServerCA:                 o.APIServerCA,
		Workers:                     o.Workers,
	}
	if err := token.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the registration token controller: %w", err)
	}
	// The manager's cache is not started yet: write through a direct client.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	if err := clusterregistration.EnsureSharedRoles(ctx, direct, o.AgentNamespace()); err != nil {
		return fmt.Errorf("creating the agents' ClusterRoles: %w", err)
	}
	reg := &clusterregistration.Reconciler{
		Client:                      mgr.GetClient(),
		Secrets:                     secrets,
		SystemRegistrationNamespace: o.SystemRegistrationNamespace(),
		AgentNamespace:              o.AgentNamespace(),
		CredentialLifetime:          o.CredentialLifetime,
		CredentialRenewAfter:        o.CredentialRenewAfter,
		APIServerURL:                o.APIServerURL,
		APIServerCA:                 o.APIServerCA,
		Workers:                     o.RegistrationWorkers,
		Recorder:                    recorder("fleet-clusterregistration"),
	}
	if err := reg.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the registration controller: %w", err)
	}
	if o.GitWorkers <= 0 {
		o.GitWorkers = 4
	}
	gr := &gitrepo.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), CacheDir: o.GitCacheDir, Workers: o.GitWorkers,
		AllowLocalRepos: o.AllowLocalRepos, FetchTimeout: o.GitFetchTimeout, MaxBundles: o.MaxBundlesPerGitRepo, GitLimits: o.GitLimits,
		SystemNamespace: o.systemNamespace(), GitHubAPIURL: o.GitHubAPIURL, Egress: o.Egress, Recorder: recorder("fleet-gitrepo")}
	if err := gr.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the gitrepo controller: %w", err)
	}
	// HelmOps download charts as GitRepos fetch git: as many at once.
	if err := (&helmop.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Workers: o.GitWorkers, Egress: o.Egress}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the helmop controller: %w", err)
	}
	if o.WebhookAddr != "" {
		h := gitrepo.NewWebhookHandler(mgr.GetClient(), gitrepo.WebhookOptions{SecretReader: mgr.GetAPIReader(), Secret: o.WebhookSecret})
		srv := &http.Server{Addr: o.WebhookAddr, Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
		if err := mgr.Add(&manager.Server{Name: "gitrepo-webhook", Server: srv}); err != nil {
			return err
		}
	}
	imp := &clusterimport.Reconciler{Client: mgr.GetClient(), APIServerURL: o.APIServerURL, APIServerCA: o.APIServerCA,
		AgentImage: o.AgentImage, AgentBundles: o.AgentBundles, StaleAfter: o.ImportStaleAfter, MaxConcurrentInstalls: o.MaxConcurrentInstalls, Workers: o.Workers,
		Secrets: secrets, SecretNamespaces: o.KubeconfigSecretNamespaces, Recorder: recorder("fleet-clusterimport")}
	if !o.DisableLocalCluster {
		if imp.Local, err = setupLocalCluster(mgr); err != nil {
			return err
		}
	}
	if err := imp.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the cluster import controller: %w", err)
	}
	if o.AgentBundles {
		ab := &agentbundle.Reconciler{Client: mgr.GetClient(), Image: o.AgentImage, MaxUnavailable: o.AgentMaxUnavailable, Workers: o.Workers}
		if err := ab.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the agent bundle controller: %w", err)
		}
	}
	// Cluster API enrollment runs where Cluster API's Cluster kind is
	// served; installed later, it is turned on when it appears.
	setupCAPI := func(ctx context.Context) error {
		r := &capi.Reconciler{Client: mgr.GetClient(), Workers: o.Workers, Secrets: secrets, Recorder: recorder("fleet-capi"),
			ClusterSelector: o.CAPIClusterSelector, NamespaceSelector: o.CAPINamespaceSelector, StaleAfter: o.ImportStaleAfter}
		if err := r.SetupWithManager(ctx, mgr); err != nil {
			return fmt.Errorf("setting up the Cluster API controller: %w", err)
		}
		return nil
	}
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}, "v1beta2"); err != nil {
		ctrl.LoggerFrom(ctx).Info("Cluster API enrollment waits for Cluster API: its v1beta2 Cluster kind is not served", "reason", err.Error())
		dc, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
		if err != nil {
			return err
		}
		if err := mgr.Add(&capi.WhenInstalled{Discovery: dc, Interval: o.CAPIInstallCheckInterval, Setup: setupCAPI}); err != nil {
			return err
		}
	} else if err := setupCAPI(ctx); err != nil {
		return err
	}
	// Agents registered by token follow the manager's address.
	if o.APIServerURL != "" {
		if err := (&manageraddress.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), APIServerURL: o.APIServerURL,
			APIServerCA: o.APIServerCA, Workers: o.Workers}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the manager address controller: %w", err)
		}
	}
	if err := (&bundle.Reconciler{Client: mgr.GetClient(), Workers: o.Workers, Recorder: recorder("fleet-bundle")}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the bundle controller: %w", err)
	}
	if err := (&cluster.Reconciler{Client: mgr.GetClient(), Workers: o.Workers, OfflineAfter: o.ClusterOfflineAfter, AgentNamespace: o.AgentNamespace(),
		Recorder: recorder("fleet-cluster")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the cluster controller: %w", err)
	}
	if err := (&clustergroup.Reconciler{Client: mgr.GetClient(), Workers: o.Workers, Recorder: recorder("fleet-clustergroup")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the cluster group controller: %w", err)
	}
	if err := (&content.Reconciler{Client: mgr.GetClient(), Workers: o.Workers, Grace: o.ContentGrace}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the content controller: %w", err)
	}
	// The state gauges and events, on the leader, limited as the rest.
	if err := metrics.Setup(mgr, limiter, metrics.Recorders{
		"GitRepo": recorder("fleet-gitrepo"), "Bundle": recorder("fleet-bundle"), "Cluster": recorder("fleet-cluster"),
	}); err != nil {
		return fmt.Errorf("setting up the state metrics: %w", err)
	}
	return nil
}

// setupLocalCluster registers the controller that keeps the local Cluster
// and returns what the import controller needs to install its agent: the
// manager's own connection, which also tells the agent where the manager is
// (as Fleet's bootstrap takes the in-cluster address, not the one given to
// remote clusters).
func setupLocalCluster(mgr ctrl.Manager) (*clusterimport.LocalCluster, error) {
	cfg := mgr.GetConfig()
	url := cfg.Host
	if !strings.Contains(url, "://") {
		url = "https://" + url
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return nil, fmt.Errorf("reading the CA of the manager's own connection for the local cluster: %w", err)
		}
	}
	lc := &localcluster.Reconciler{Client: mgr.GetClient(), Namespace: fleet.LocalWorkspace, APIServerURL: url, APIServerCA: ca}
	if err := lc.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the local cluster controller: %w", err)
	}
	return &clusterimport.LocalCluster{
		Cluster: client.ObjectKey{Namespace: fleet.LocalWorkspace, Name: fleet.LocalClusterName},
		Secret:  client.ObjectKey{Namespace: fleet.LocalWorkspace, Name: fleet.LocalClusterSecretName},
		Config:  cfg,
	}, nil
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
		LeaderElectionID:              "fleet-manager.fleet.cattle.io",
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
