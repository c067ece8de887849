// Command fleet-manager runs the fleet manager's controllers.
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/controllers/agentbundle"
	"github.com/gitfleet/fleet/controllers/clusterregistration"
	"github.com/gitfleet/fleet/controllers/gitrepo"
	"github.com/gitfleet/fleet/internal/agentmanifest"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/memlimit"
	"github.com/gitfleet/fleet/internal/metrics"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/internal/sharding"
	"github.com/gitfleet/fleet/internal/version"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

// flags are the manager's flags: each concern binds its own (bind*), and
// complete turns what they hold into the manager's options.
type flags struct {
	o controllers.RunOptions
	// Values read or checked before they go into o.
	kubeconfig, caFile, agentImage, agentMaxUnavailable string
	webhookSecretFile                                   string
	capiClusterSelector, capiNamespaceSelector          string
	egressAllow, egressDeny                             []string
	qps                                                 float32
	burst                                               int
	localCluster                                        bool
	notifications                                       bool
}

// newCommand binds the manager's flags to its options; the Helm chart's
// arguments are checked against these flags (main_test.go).
func newCommand() *cobra.Command {
	fl := &flags{}
	cmd := &cobra.Command{
		Use:          "fleet-manager",
		Short:        "Run the fleet manager: GitRepos to Bundles to BundleDeployments, and cluster registration",
		SilenceUsage: true,
		Version:      version.Get(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New())
			if soft, err := memlimit.Apply(); err != nil {
				ctrl.Log.Error(err, "No soft memory limit: the container's memory limit could not be read (set GOMEMLIMIT to give one)")
			} else if soft > 0 {
				ctrl.Log.Info("Soft memory limit set below the container's", "GOMEMLIMIT", fmt.Sprintf("%dMiB", soft>>20))
			}
			if err := fl.complete(); err != nil {
				return err
			}
			cfg, err := kubeconfig.Load(fl.kubeconfig)
			if err != nil {
				return err
			}
			cfg.QPS, cfg.Burst = fl.qps, fl.burst
			ctrl.Log.Info("Outbound policy for what tenants name (repositories, charts, the GitHub API)", "policy", fl.o.Egress.String())
			return controllers.Run(ctrl.SetupSignalHandler(), cfg, fl.o)
		},
	}
	f := cmd.Flags()
	fl.bindProcess(f)
	fl.bindAgents(f)
	fl.bindGit(f)
	fl.bindEgress(f)
	fl.bindClusters(f)
	fl.bindEvents(f)
	return cmd
}

// bindProcess binds the flags of the manager process: its API server, its
// namespace, workers, leader election and the addresses it serves.
func (fl *flags) bindProcess(f *pflag.FlagSet) {
	o := &fl.o
	f.StringVar(&fl.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to manage from (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
	f.StringVar(&o.SystemNamespace, "system-namespace", fleet.DefaultSystemNamespace, "namespace the manager runs in")
	f.IntVar(&o.Workers, "workers", controllers.DefaultWorkers, "concurrent reconciles per controller")
	f.Float32Var(&fl.qps, "kube-api-qps", 500, "API requests per second to the manager's API server")
	f.IntVar(&fl.burst, "kube-api-burst", 1000, "API request burst to the manager's API server")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", "0", "metrics address (0 disables)")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", "", "health probe address (empty disables)")
	f.StringVar(&o.DashboardAddr, "dashboard-bind-address", "",
		"address serving the read-only web dashboard (empty disables); each request needs a bearer token, and shows only what its user may list")
	f.StringVar(&o.PprofAddr, "pprof-bind-address", "", "address serving Go profiles at /debug/pprof (empty disables)")
	f.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader among replicas")
	f.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 0, "leader lease duration (default 15s)")
	f.StringVar(&o.ShardID, "shard-id", "",
		"serve only the GitRepos, HelmOps and Bundles labelled fleet.cattle.io/shard-ref with this ID, as Fleet's --shard-id (default: the default shard, which serves the unlabelled ones, clusters and registration)")
}

// bindAgents binds what agents are told and given: the manager's address,
// their image and its rollout, their registration and credentials.
func (fl *flags) bindAgents(f *pflag.FlagSet) {
	o := &fl.o
	f.StringVar(&o.APIServerURL, "api-server-url", "", "URL agents use to reach this cluster's API server")
	f.StringVar(&fl.caFile, "api-server-ca-file", "", "CA certificate agents use to trust this API server")
	f.StringVar(&fl.agentImage, "agent-image", agentinstall.DefaultImage, "agent image installed into imported clusters and offered to every registered cluster's agent")
	f.BoolVar(&o.AgentBundles, "agent-bundles", true,
		"keep an agent Bundle per registered cluster, through which every agent gets its Cluster's agent settings and --agent-image")
	f.StringVar(&fl.agentMaxUnavailable, "agent-max-unavailable", agentbundle.DefaultMaxUnavailable.String(),
		"clusters of a namespace whose agent may move to a new image, or be not Ready, at once: a number or a percentage (at least one)")
	f.StringVar(&o.AgentTLSMode, "agent-tls-mode", agentmanifest.TLSModeStrict,
		"how installed agents trust this API server: strict (only --api-server-ca-file, or the system's CAs when it is empty) or system-store (the system's CAs as well)")
	f.DurationVar(&o.AgentGarbageCollectionInterval, "agent-garbage-collection-interval", 0,
		"how often installed agents look for Helm releases no BundleDeployment asks for (default: the agent's, 15m)")
	f.StringSliceVar(&o.AgentImagePullSecrets, "agent-image-pull-secrets", nil,
		"Secrets of the system namespace that installs copy into each agent's namespace and pull the agent image with")
	f.IntVar(&o.RegistrationWorkers, "registration-workers", controllers.DefaultRegistrationWorkers, "cluster registrations granted at once")
	f.DurationVar(&o.CredentialLifetime, "agent-credential-lifetime", controllers.DefaultCredentialLifetime,
		"lifetime of agent credentials; agents renew theirs when a third of it remains (at least 10m)")
	f.DurationVar(&o.CredentialRenewAfter, "agent-credential-renew-after", 0,
		"age of an agent's newest token at which the manager issues the next one, for the agent to switch to (default half of --agent-credential-lifetime; keep it under two thirds)")
}

// bindGit binds how GitRepos are fetched and read, and the push webhook.
func (fl *flags) bindGit(f *pflag.FlagSet) {
	o := &fl.o
	f.StringVar(&o.GitCacheDir, "git-cache-dir", "", "directory for git caches, locked by this process (default: a new directory below the temp directory, deleted at exit)")
	f.IntVar(&o.GitWorkers, "git-workers", 4, "concurrent git fetches (one namespace holds at most half of them)")
	f.BoolVar(&o.AllowLocalRepos, "allow-local-repos", false, "let GitRepos name local paths and file:// URLs; they can read other GitRepos' git caches (demos only)")
	f.StringVar(&o.GitHubAPIURL, "github-api-url", "", "GitHub API URL for GitRepos with GitHub App credentials (default https://api.<repository host>, as Fleet; https://HOST/api/v3 for GitHub Enterprise Server)")
	f.DurationVar(&o.GitFetchTimeout, "git-fetch-timeout", gitfetch.DefaultFetchTimeout, "time limit of one git fetch")
	f.IntVar(&o.MaxBundlesPerGitRepo, "max-bundles-per-gitrepo", gitrepo.DefaultMaxBundles, "most bundles one GitRepo may produce")
	f.StringVar(&o.OCIStorageSecret, "oci-storage-secret", "", "an OCI storage Secret (type "+fleet.OCIStorageSecretType+") in the manager's namespace: the manager-wide registry for bundle contents above --oci-storage-threshold, for GitRepos whose namespace has no registry of its own (ociRegistrySecret, an ocistorage Secret)")
	f.BoolVar(&o.HelmOpChartsInBundle, "helmop-charts-in-bundle", false, "download each HelmOp's chart on the manager and store it in its Bundle, for clusters that cannot reach the chart repositories; by default, as in Fleet, each agent downloads the chart itself")
	f.IntVar(&o.OCIStorageThreshold, "oci-storage-threshold", ocistorage.DefaultThreshold, "size in bytes of a bundle's content above which it goes to the --oci-storage-secret registry instead of etcd")
	f.IntVar(&o.OCIStorageMaxBytes, "oci-storage-max-bytes", ocistorage.DefaultMaxBytes, "largest bundle (bytes of resources, uncompressed) read from git when its content goes to a registry (its GitRepo's, or --oci-storage-secret's with a threshold under etcd's 1.5 MiB); bundles that land in etcd stay under 1.5 MiB")
	f.Int64Var(&o.GitLimits.PackBytes, "git-max-pack-bytes", gitfetch.DefaultMaxPackBytes, "most bytes one git fetch may receive (the compressed pack)")
	f.Int64Var(&o.GitLimits.Objects, "git-max-objects", gitfetch.DefaultMaxObjects, "most objects one git fetch may bring, and most files and directories one checkout may write")
	f.Int64Var(&o.GitLimits.FileBytes, "git-max-file-bytes", gitfetch.DefaultMaxFileBytes, "largest file (any git object), uncompressed, of a fetch or checkout")
	f.Int64Var(&o.GitLimits.CommitBytes, "git-max-commit-bytes", gitfetch.DefaultMaxCommitBytes, "most bytes, uncompressed, of all the objects of one git fetch and of all the files of one checkout")
	f.IntVar(&o.GitLimits.PathDepth, "git-max-path-depth", gitfetch.DefaultMaxPathDepth, "most directories a file path of a checkout may cross")
	f.IntVar(&o.GitLimits.PathLength, "git-max-path-length", gitfetch.DefaultMaxPathLength, "longest file path of a checkout, in bytes")
	f.StringVar(&o.WebhookAddr, "webhook-bind-address", ":8082", "address of the git push webhook endpoint (empty disables)")
	f.StringVar(&fl.webhookSecretFile, "webhook-secret-file", "",
		"file holding the secret webhook calls must be signed with for GitRepos without webhookSecret (default: such calls need no signature)")
}

// bindEgress binds where the manager may connect for tenants.
func (fl *flags) bindEgress(f *pflag.FlagSet) {
	f.StringSliceVar(&fl.egressAllow, "egress-allow-cidrs", nil,
		"CIDRs or addresses the manager may connect to for tenants (git, charts, the GitHub API) although refused by default: loopback, link-local (cloud metadata), unspecified, multicast, broadcast")
	f.StringSliceVar(&fl.egressDeny, "egress-deny-cidrs", nil,
		"CIDRs or addresses the manager never connects to for tenants (git, charts, the GitHub API), besides the defaults; wins over --egress-allow-cidrs (e.g. the pod and service networks)")
}

// bindClusters binds how clusters are imported, enrolled and shown.
func (fl *flags) bindClusters(f *pflag.FlagSet) {
	o := &fl.o
	f.DurationVar(&o.ImportStaleAfter, "import-stale-after", 0, "reinstall the agent of an imported cluster that has not checked in for this long (default 15m)")
	f.DurationVar(&o.ClusterOfflineAfter, "cluster-offline-after", 0, "show a Cluster Offline when its agent has not checked in for this long (default 45m)")
	f.StringSliceVar(&o.KubeconfigSecretNamespaces, "kubeconfig-secret-namespaces", nil,
		"namespaces from which Clusters of other namespaces may take their kubeconfig Secret (spec.kubeConfigSecretNamespace); default none")
	f.BoolVar(&fl.notifications, "notifications", true,
		"Run the Notification controller: tell the webhooks, chats and git hosts that tenants' Notifications name about their rollouts (docs/notifications.md)")
	f.BoolVar(&fl.localCluster, "local-cluster", true,
		"keep the Cluster local in fleet-local for this cluster, with its agent and the ClusterGroup default selecting it, as Fleet does")
	f.StringVar(&fl.capiClusterSelector, "capi-cluster-selector", "",
		"opt-in enrollment: only Cluster API Clusters whose labels match this selector (e.g. fleet.cattle.io/enroll=true) are enrolled; default: every one not labelled fleet.cattle.io/enroll=false")
	f.StringVar(&fl.capiNamespaceSelector, "capi-namespace-selector", "",
		"opt-in enrollment: only Cluster API Clusters in namespaces whose labels match this selector are enrolled; default: every namespace not labelled fleet.cattle.io/enroll=false")
	f.BoolVar(&o.CAPIClusterClassGroups, "capi-cluster-class-groups", false,
		"keep a ClusterGroup per ClusterClass in each namespace where an enrolled Cluster API Cluster uses it, selecting its fleet Clusters, as Fleet's Cluster API add-on provider does")
	f.DurationVar(&o.CAPIInstallCheckInterval, "capi-install-check-interval", 0,
		"how often a manager started without Cluster API looks for it, to turn enrollment on once it is installed (default 30s)")
	f.IntVar(&o.MaxConcurrentInstalls, "max-concurrent-installs", 0, "agent installs into imported clusters at once (default 20)")
}

// bindEvents binds the bounds of the events the manager records.
func (fl *flags) bindEvents(f *pflag.FlagSet) {
	o := &fl.o
	f.BoolVar(&o.PerObjectMetrics, "per-object-metrics", false,
		"serve Fleet's per-object metrics (fleet_bundle_state, fleet_cluster_ready, ...: one series per object), for Fleet's Grafana dashboards")
	f.IntVar(&o.PerObjectMetricsMaxSeries, "per-object-metrics-max-series", metrics.DefaultPerObjectMaxSeries,
		"most series the per-object metrics serve; objects past it are left out and counted in fleet_per_object_metrics_dropped_objects")
	f.IntVar(&o.Events.Burst, "event-burst", metrics.DefaultEventBurst, "events one object may get at once; then one per --event-interval")
	f.DurationVar(&o.Events.Interval, "event-interval", metrics.DefaultEventInterval, "once an object's burst is used, it gets one event per interval")
	f.Float64Var(&o.Events.QPS, "event-qps", metrics.DefaultEventQPS, "events per second over all objects (a burst of ten seconds' worth)")
}

// complete reads and checks the values the flags hold into the options:
// files, selectors, CIDRs and the agents' rollout budget.
func (fl *flags) complete() error {
	o := &fl.o
	var err error
	if err := sharding.Validate(o.ShardID); err != nil {
		return fmt.Errorf("--shard-id: %w", err)
	}
	if fl.caFile != "" {
		if o.APIServerCA, err = os.ReadFile(fl.caFile); err != nil {
			return fmt.Errorf("reading --api-server-ca-file: %w", err)
		}
	}
	o.AgentImage = fl.agentImage
	if err := agentmanifest.ValidateTLSMode(o.AgentTLSMode); err != nil {
		return fmt.Errorf("--agent-tls-mode: %w", err)
	}
	if o.PerObjectMetricsMaxSeries < 0 {
		return fmt.Errorf("--per-object-metrics-max-series %d: must not be negative", o.PerObjectMetricsMaxSeries)
	}
	if o.CAPIClusterSelector, err = parseSelector("--capi-cluster-selector", fl.capiClusterSelector); err != nil {
		return err
	}
	if o.CAPINamespaceSelector, err = parseSelector("--capi-namespace-selector", fl.capiNamespaceSelector); err != nil {
		return err
	}
	if o.Egress.Allow, err = egress.ParsePrefixes(fl.egressAllow); err != nil {
		return fmt.Errorf("--egress-allow-cidrs: %w", err)
	}
	if o.Egress.Deny, err = egress.ParsePrefixes(fl.egressDeny); err != nil {
		return fmt.Errorf("--egress-deny-cidrs: %w", err)
	}
	if o.AgentBundles {
		v := intstr.Parse(fl.agentMaxUnavailable)
		if _, err := agentbundle.Budget(v, 10); err != nil {
			return fmt.Errorf("--agent-max-unavailable: %w", err)
		}
		o.AgentMaxUnavailable = &v
	}
	if err := clusterregistration.CheckRenewAfter(o.CredentialLifetime, o.CredentialRenewAfter); err != nil {
		return fmt.Errorf("--agent-credential-renew-after: %w", err)
	}
	o.DisableLocalCluster = !fl.localCluster
	o.DisableNotifications = !fl.notifications
	if fl.webhookSecretFile != "" {
		secret, err := os.ReadFile(fl.webhookSecretFile)
		if err != nil {
			return fmt.Errorf("reading --webhook-secret-file: %w", err)
		}
		if o.WebhookSecret = bytes.TrimSpace(secret); len(o.WebhookSecret) == 0 {
			return fmt.Errorf("--webhook-secret-file %s is empty: put the secret in it", fl.webhookSecretFile)
		}
	}
	return nil
}

// parseSelector reads a label selector flag; empty means none (nil).
func parseSelector(flag, v string) (labels.Selector, error) {
	if v == "" {
		return nil, nil
	}
	sel, err := labels.Parse(v)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not a label selector (e.g. env=prod,tier in (web,api)): %w", flag, v, err)
	}
	return sel, nil
}
