package diagnose

import (
	"fmt"
	"sort"
	"time"
)

// Severity orders findings: Critical first.
type Severity int

const (
	// Critical means something is not deployed or cannot be, and will not fix itself.
	Critical Severity = iota
	// Warning means something is late, drifted or held; it needs a look.
	Warning
	// Info means worth knowing, nothing is broken yet.
	Info
)

func (s Severity) String() string {
	switch s {
	case Critical:
		return "critical"
	case Warning:
		return "warning"
	}
	return "info"
}

// MarshalText writes the severity's name (in JSON output).
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a severity's name, so that analyze's JSON output
// reads back.
func (s *Severity) UnmarshalText(text []byte) error {
	for _, v := range []Severity{Critical, Warning, Info} {
		if string(text) == v.String() {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("unknown severity %q: give critical, warning or info", text)
}

// Finding is one problem: which check found it, on which object, what it is
// and what to do.
type Finding struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	// Object is "Kind namespace/name".
	Object  string `json:"object"`
	Message string `json:"message"`
	Action  string `json:"action"`
}

func (f Finding) String() string {
	return fmt.Sprintf("[%s] %s: %s: %s\n    -> %s", f.Severity, f.Check, f.Object, f.Message, f.Action)
}

// Options are the thresholds of the checks.
type Options struct {
	// SilentAfter: an agent whose last check-in is older is silent (5m).
	SilentAfter time.Duration
	// StuckAfter: a deployment waiting to be applied longer is stuck, a
	// Cluster API cluster initialized and not enrolled longer is reported
	// (10m).
	StuckAfter time.Duration
	// TokenWarning: a registration token expiring sooner is reported (24h).
	TokenWarning time.Duration
	// AgentImage is the agent image every cluster should run; empty: the
	// image most agent bundles deploy.
	AgentImage string
}

func (o Options) withDefaults() Options {
	if o.SilentAfter == 0 {
		o.SilentAfter = 5 * time.Minute
	}
	if o.StuckAfter == 0 {
		o.StuckAfter = 10 * time.Minute
	}
	if o.TokenWarning == 0 {
		o.TokenWarning = 24 * time.Hour
	}
	return o
}

// Check is one check over a snapshot.
type Check struct {
	Name string
	// Needs are the kinds the check reads; when one was unreadable the
	// check is reported as not run.
	Needs []string
	Run   func(s *Snapshot, o Options) []Finding
}

// Checks are every check Analyze runs, in no particular order.
var Checks = []Check{
	{Name: CheckAgentOffline, Needs: []string{KindCluster}, Run: agentOffline},
	{Name: CheckAgentOutdated, Needs: []string{KindBundle, KindBundleDeployment}, Run: agentOutdated},
	{Name: CheckDeployFailed, Needs: []string{KindBundleDeployment}, Run: deployFailed},
	{Name: CheckStuckWaitApplied, Needs: []string{KindBundleDeployment}, Run: stuckWaitApplied},
	{Name: CheckModified, Needs: []string{KindBundleDeployment}, Run: modified},
	{Name: CheckRolloutHeld, Needs: []string{KindBundle, KindBundleDeployment}, Run: rolloutHeld},
	{Name: CheckDependsOnCycle, Needs: []string{KindBundle}, Run: dependsOnCycle},
	{Name: CheckDependsOnWaiting, Needs: []string{KindBundleDeployment}, Run: dependsOnWaiting},
	{Name: CheckTokenExpiring, Needs: []string{KindToken}, Run: tokenExpiring},
	{Name: CheckNotImported, Needs: []string{KindCluster}, Run: notImported},
	{Name: CheckGitRepoFetch, Needs: []string{KindGitRepo}, Run: gitRepoFetch},
	{Name: CheckGitRepoBehind, Needs: []string{KindGitRepo}, Run: gitRepoBehind},
	{Name: CheckCAPINotEnrolled, Needs: []string{KindCAPICluster}, Run: capiNotEnrolled},
	{Name: CheckValuesDiffer, Needs: []string{KindBundle, KindBundleDeployment, KindCluster, KindClusterGroup}, Run: valuesDiffer},
}

// Analyze runs every check and returns the findings, most urgent first, and
// the checks that could not run for want of read rights.
func Analyze(s *Snapshot, o Options) (findings []Finding, skipped []string) {
	o = o.withDefaults()
	why := map[string]string{}
	for _, k := range s.Absent {
		why[k] = "no " + k + " served or dumped"
	}
	for _, k := range s.Unreadable {
		why[k] = "may not list " + k
	}
	for _, c := range Checks {
		blocked := ""
		for _, k := range c.Needs {
			if why[k] != "" {
				blocked = why[k]
			}
		}
		if blocked != "" {
			skipped = append(skipped, fmt.Sprintf("%s (%s)", c.Name, blocked))
			continue
		}
		findings = append(findings, c.Run(s, o)...)
	}
	sort.SliceStable(findings, func(i, j int) bool {
		a, b := findings[i], findings[j]
		if a.Severity != b.Severity {
			return a.Severity < b.Severity
		}
		if a.Check != b.Check {
			return a.Check < b.Check
		}
		return a.Object < b.Object
	})
	return findings, skipped
}

// NeedsAttention tells whether any finding is a warning or worse: the exit
// code of `fleet analyze`.
func NeedsAttention(findings []Finding) bool {
	for _, f := range findings {
		if f.Severity <= Warning {
			return true
		}
	}
	return false
}

// The kinds a snapshot holds, as Unreadable names them.
const (
	KindCluster          = "clusters"
	KindClusterGroup     = "clustergroups"
	KindBundle           = "bundles"
	KindBundleDeployment = "bundledeployments"
	KindGitRepo          = "gitrepos"
	KindHelmOp           = "helmops"
	KindToken            = "clusterregistrationtokens"
	KindRegistration     = "clusterregistrations"
	KindLease            = "leases"
	// KindCAPICluster is Cluster API's Cluster kind.
	KindCAPICluster = "clusters.cluster.x-k8s.io"
)

// The checks' names.
const (
	CheckAgentOffline     = "agent-offline"
	CheckAgentOutdated    = "agent-outdated"
	CheckDeployFailed     = "deploy-failed"
	CheckStuckWaitApplied = "stuck-wait-applied"
	CheckModified         = "modified"
	CheckRolloutHeld      = "rollout-held"
	CheckDependsOnCycle   = "dependson-cycle"
	CheckDependsOnWaiting = "dependson-waiting"
	CheckTokenExpiring    = "token-expiring" //nolint:gosec // G101: a check's name, not a credential
	CheckNotImported      = "cluster-not-imported"
	CheckGitRepoFetch     = "gitrepo-fetch-failed"
	CheckGitRepoBehind    = "gitrepo-behind"
	CheckValuesDiffer     = "values-render-differently"
	CheckCAPINotEnrolled  = "capi-not-enrolled"
)
