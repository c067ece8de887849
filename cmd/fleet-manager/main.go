// Command fleet-manager runs the fleet manager's controllers.
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"
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
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/memlimit"
	"github.com/gitfleet/fleet/internal/metrics"
	"github.com/gitfleet/fleet/internal/version"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

// newCommand binds the manager's flags to its options; the Helm chart's
// arguments are checked against these flags (main_test.go).
func newCommand() *cobra.Command {
	o := controllers.RunOptions{}
	var kubeconfigPath, caFile, agentImage, webhookSecretFile, agentMaxUnavailable string
	var qps float32
	var burst int
	var localCluster bool
	var capiClusterSelector, capiNamespaceSelector string
	var egressAllow, egressDeny []string
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
			cfg, err := kubeconfig.Load(kubeconfigPath)
			if err != nil {
				return err
			}
			cfg.QPS, cfg.Burst = qps, burst
			if caFile != "" {
				if o.APIServerCA, err = os.ReadFile(caFile); err != nil {
					return fmt.Errorf("reading --api-server-ca-file: %w", err)
				}
			}
			o.AgentImage = agentImage
			if o.CAPIClusterSelector, err = parseSelector("--capi-cluster-selector", capiClusterSelector); err != nil {
				return err
			}
			if o.CAPINamespaceSelector, err = parseSelector("--capi-namespace-selector", capiNamespaceSelector); err != nil {
				return err
			}
			if o.Egress.Allow, err = egress.ParsePrefixes(egressAllow); err != nil {
				return fmt.Errorf("--egress-allow-cidrs: %w", err)
			}
			if o.Egress.Deny, err = egress.ParsePrefixes(egressDeny); err != nil {
				return fmt.Errorf("--egress-deny-cidrs: %w", err)
			}
			ctrl.Log.Info("Outbound policy for what tenants name (repositories, charts, the GitHub API)", "policy", o.Egress.String())
			if o.AgentBundles {
				v := intstr.Parse(agentMaxUnavailable)
				if _, err := agentbundle.Budget(v, 10); err != nil {
					return fmt.Errorf("--agent-max-unavailable: %w", err)
				}
				o.AgentMaxUnavailable = &v
			}
			if err := clusterregistration.CheckRenewAfter(o.CredentialLifetime, o.CredentialRenewAfter); err != nil {
				return fmt.Errorf("--agent-credential-renew-after: %w", err)
			}
			o.DisableLocalCluster = !localCluster
			if webhookSecretFile != "" {
				secret, err := os.ReadFile(webhookSecretFile)
				if err != nil {
					return fmt.Errorf("reading --webhook-secret-file: %w", err)
				}
				if o.WebhookSecret = bytes.TrimSpace(secret); len(o.WebhookSecret) == 0 {
					return fmt.Errorf("--webhook-secret-file %s is empty: put the secret in it", webhookSecretFile)
				}
			}
			return controllers.Run(ctrl.SetupSignalHandler(), cfg, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfigPath, "kubeconfig", "", "kubeconfig of the cluster to manage from (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
	f.StringVar(&o.SystemNamespace, "system-namespace", fleet.DefaultSystemNamespace, "namespace the manager runs in")
	f.StringVar(&o.APIServerURL, "api-server-url", "", "URL agents use to reach this cluster's API server")
	f.StringVar(&caFile, "api-server-ca-file", "", "CA certificate agents use to trust this API server")
	f.StringVar(&agentImage, "agent-image", agentinstall.DefaultImage, "agent image installed into imported clusters and offered to every registered cluster's agent")
	f.BoolVar(&o.AgentBundles, "agent-bundles", true,
		"keep an agent Bundle per registered cluster, through which every agent gets its Cluster's agent settings and --agent-image")
	f.StringVar(&agentMaxUnavailable, "agent-max-unavailable", agentbundle.DefaultMaxUnavailable.String(),
		"clusters of a namespace whose agent may move to a new image, or be not Ready, at once: a number or a percentage (at least one)")
	f.IntVar(&o.Workers, "workers", controllers.DefaultWorkers, "concurrent reconciles per controller")
	f.IntVar(&o.RegistrationWorkers, "registration-workers", controllers.DefaultRegistrationWorkers, "cluster registrations granted at once")
	f.Float32Var(&qps, "kube-api-qps", 500, "API requests per second to the manager's API server")
	f.IntVar(&burst, "kube-api-burst", 1000, "API request burst to the manager's API server")
	f.StringVar(&o.GitCacheDir, "git-cache-dir", "", "directory for git caches (default: below the temp directory)")
	f.IntVar(&o.GitWorkers, "git-workers", 4, "concurrent git fetches (one namespace holds at most half of them)")
	f.BoolVar(&o.AllowLocalRepos, "allow-local-repos", false, "let GitRepos name local paths and file:// URLs; they can read other GitRepos' git caches (demos only)")
	f.StringSliceVar(&egressAllow, "egress-allow-cidrs", nil,
		"CIDRs or addresses the manager may connect to for tenants (git, charts, the GitHub API) although refused by default: loopback, link-local (cloud metadata), unspecified, multicast, broadcast")
	f.StringSliceVar(&egressDeny, "egress-deny-cidrs", nil,
		"CIDRs or addresses the manager never connects to for tenants (git, charts, the GitHub API), besides the defaults; wins over --egress-allow-cidrs (e.g. the pod and service networks)")
	f.StringVar(&o.GitHubAPIURL, "github-api-url", "", "GitHub API URL for GitRepos with GitHub App credentials (default https://api.<repository host>, as Fleet; https://HOST/api/v3 for GitHub Enterprise Server)")
	f.DurationVar(&o.GitFetchTimeout, "git-fetch-timeout", gitfetch.DefaultFetchTimeout, "time limit of one git fetch")
	f.IntVar(&o.MaxBundlesPerGitRepo, "max-bundles-per-gitrepo", gitrepo.DefaultMaxBundles, "most bundles one GitRepo may produce")
	f.Int64Var(&o.GitLimits.PackBytes, "git-max-pack-bytes", gitfetch.DefaultMaxPackBytes, "most bytes one git fetch may receive (the compressed pack)")
	f.Int64Var(&o.GitLimits.Objects, "git-max-objects", gitfetch.DefaultMaxObjects, "most objects one git fetch may bring, and most files and directories one checkout may write")
	f.Int64Var(&o.GitLimits.FileBytes, "git-max-file-bytes", gitfetch.DefaultMaxFileBytes, "largest file (any git object), uncompressed, of a fetch or checkout")
	f.Int64Var(&o.GitLimits.CommitBytes, "git-max-commit-bytes", gitfetch.DefaultMaxCommitBytes, "most bytes, uncompressed, of all the objects of one git fetch and of all the files of one checkout")
	f.IntVar(&o.GitLimits.PathDepth, "git-max-path-depth", gitfetch.DefaultMaxPathDepth, "most directories a file path of a checkout may cross")
	f.IntVar(&o.GitLimits.PathLength, "git-max-path-length", gitfetch.DefaultMaxPathLength, "longest file path of a checkout, in bytes")
	f.StringVar(&o.WebhookAddr, "webhook-bind-address", ":8082", "address of the git push webhook endpoint (empty disables)")
	f.StringVar(&webhookSecretFile, "webhook-secret-file", "",
		"file holding the secret webhook calls must be signed with for GitRepos without webhookSecret (default: such calls need no signature)")
	f.DurationVar(&o.ImportStaleAfter, "import-stale-after", 0, "reinstall the agent of an imported cluster that has not checked in for this long (default 15m)")
	f.DurationVar(&o.ClusterOfflineAfter, "cluster-offline-after", 0, "show a Cluster Offline when its agent has not checked in for this long (default 45m)")
	f.StringSliceVar(&o.KubeconfigSecretNamespaces, "kubeconfig-secret-namespaces", nil,
		"namespaces from which Clusters of other namespaces may take their kubeconfig Secret (spec.kubeConfigSecretNamespace); default none")
	f.BoolVar(&localCluster, "local-cluster", true,
		"keep the Cluster local in fleet-local for this cluster, with its agent and the ClusterGroup default selecting it, as Fleet does")
	f.StringVar(&capiClusterSelector, "capi-cluster-selector", "",
		"opt-in enrollment: only Cluster API Clusters whose labels match this selector (e.g. fleet.cattle.io/enroll=true) are enrolled; default: every one not labelled fleet.cattle.io/enroll=false")
	f.StringVar(&capiNamespaceSelector, "capi-namespace-selector", "",
		"opt-in enrollment: only Cluster API Clusters in namespaces whose labels match this selector are enrolled; default: every namespace not labelled fleet.cattle.io/enroll=false")
	f.DurationVar(&o.CAPIInstallCheckInterval, "capi-install-check-interval", 0,
		"how often a manager started without Cluster API looks for it, to turn enrollment on once it is installed (default 30s)")
	f.IntVar(&o.MaxConcurrentInstalls, "max-concurrent-installs", 0, "agent installs into imported clusters at once (default 20)")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", "0", "metrics address (0 disables)")
	f.IntVar(&o.Events.Burst, "event-burst", metrics.DefaultEventBurst, "events one object may get at once; then one per --event-interval")
	f.DurationVar(&o.Events.Interval, "event-interval", metrics.DefaultEventInterval, "once an object's burst is used, it gets one event per interval")
	f.Float64Var(&o.Events.QPS, "event-qps", metrics.DefaultEventQPS, "events per second over all objects (a burst of ten seconds' worth)")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", "", "health probe address (empty disables)")
	f.StringVar(&o.PprofAddr, "pprof-bind-address", "", "address serving Go profiles at /debug/pprof (empty disables)")
	f.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader among replicas")
	f.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 0, "leader lease duration (default 15s)")
	f.DurationVar(&o.CredentialLifetime, "agent-credential-lifetime", controllers.DefaultCredentialLifetime,
		"lifetime of agent credentials; agents renew theirs when a third of it remains (at least 10m)")
	f.DurationVar(&o.CredentialRenewAfter, "agent-credential-renew-after", 0,
		"age of an agent's newest token at which the manager issues the next one, for the agent to switch to (default half of --agent-credential-lifetime; keep it under two thirds)")
	return cmd
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
