// Package names computes the names fleet gives the objects it creates, exactly
// as Rancher Fleet does, so that manifests, tooling and habits carry over: the
// per-cluster namespace, the Cluster created by a registration, Contents,
// credential secrets and bundle names.
package names

import (
	"crypto/md5" //nolint:gosec // Fleet's bundle names use md5 as a short, stable suffix, not for security.
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

const (
	// MaxNameLength is the longest DNS-1123 label (namespaces, most objects).
	MaxNameLength = 63
	// MaxBundleNameLength leaves room in a Helm release name.
	MaxBundleNameLength = 53
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s)) //nolint:gosec // naming, not security
	return hex.EncodeToString(sum[:])
}

// ClusterNamespace is the namespace that holds a cluster's
// BundleDeployments: cluster-<workspace>-<cluster>-<12 hex of
// sha256(workspace::cluster)>, as Fleet names it. A longer name than 63 is
// cut to 46 characters plus a 64-bit (16 hex) hash of the whole name:
// different clusters must not be led to one namespace by a short hash.
func ClusterNamespace(workspace, cluster string) string {
	name := clusterNamespaceBase(workspace, cluster)
	if len(name) <= MaxNameLength {
		return name
	}
	return name[:46] + "-" + sha256Hex(name)[:16]
}

// LegacyClusterNamespace is the name earlier versions gave a cluster
// namespace: the same as ClusterNamespace up to 63 characters, past that cut
// to 57 plus a 20-bit (5 hex) hash.
func LegacyClusterNamespace(workspace, cluster string) string {
	name := clusterNamespaceBase(workspace, cluster)
	if len(name) <= MaxNameLength {
		return name
	}
	return name[:57] + "-" + sha256Hex(name)[:5]
}

// ClusterNamespaceFor is the namespace of a Cluster whose status records
// recorded (status.namespace, "" when not recorded yet): a Cluster made by an
// earlier version keeps its legacy namespace, every other one gets
// ClusterNamespace. Nothing else recorded is followed, as the agent may write
// its Cluster's status.
func ClusterNamespaceFor(workspace, cluster, recorded string) string {
	if recorded != "" && recorded == LegacyClusterNamespace(workspace, cluster) {
		return recorded
	}
	return ClusterNamespace(workspace, cluster)
}

func clusterNamespaceBase(workspace, cluster string) string {
	return "cluster-" + workspace + "-" + cluster + "-" + sha256Hex(workspace + "::" + cluster)[:12]
}

// AgentServiceAccount names the ServiceAccount (and the bindings) whose token
// is the credential of one grant: a hash of the grant (the Cluster, the
// identity and the request's nonce), never a name the requester chose, so
// that a registration cannot pick an existing object to be replaced.
func AgentServiceAccount(workspace, cluster, clientID, clientRandom string) string {
	return "fleet-agent-" + sha256Hex(workspace + "\x00" + cluster + "\x00" + clientID + "\x00" + clientRandom)[:16]
}

// RegistrationTokenServiceAccount names the ServiceAccount behind the
// registration token namespace/name. It lives in the system registration
// namespace, so the name carries the token's namespace, and a 64-bit hash of
// both keeps tokens of the same name in different namespaces apart.
func RegistrationTokenServiceAccount(namespace, name string) string {
	readable := "token-" + namespace + "-" + name
	if len(readable) > 46 {
		readable = strings.TrimRight(readable[:46], "-.")
	}
	return readable + "-" + sha256Hex(namespace + "/" + name)[:16]
}

// RegistrationTokenSecret names the Secret, beside the registration token
// name, that holds the token's values (agentinstall.Bootstrap).
func RegistrationTokenSecret(name string) string {
	return name + "-token"
}

// ClusterForClientID names the Cluster a token registration creates.
func ClusterForClientID(clientID string) string {
	return "cluster-" + sha256Hex(clientID)[:12]
}

// Content names the Content holding resources whose uncompressed JSON is
// resourcesJSON.
func Content(resourcesJSON []byte) string {
	return Limit("s-"+sha256Hex(string(resourcesJSON)), MaxNameLength)
}

// CredentialSecret names the secret that hands a registered agent its
// credential.
func CredentialSecret(clientID, clientRandom string) string {
	return Limit("c-"+sha256Hex(clientID+clientRandom), MaxNameLength)
}

// SystemRegistrationNamespace derives the namespace of credential secrets
// from the system namespace: fleet-system gives fleet-clusters-system.
func SystemRegistrationNamespace(systemNamespace string) string {
	if base, ok := strings.CutSuffix(systemNamespace, "-system"); ok {
		return base + "-clusters-system"
	}
	return systemNamespace + "-clusters-system"
}

// AgentIdentityNamespace derives the namespace of the agents'
// ServiceAccounts from the system namespace: fleet-system gives
// fleet-agents-system. One namespace for all agents lets one binding to its
// ServiceAccounts' group grant what every agent may do cluster-wide.
func AgentIdentityNamespace(systemNamespace string) string {
	if base, ok := strings.CutSuffix(systemNamespace, "-system"); ok {
		return base + "-agents-system"
	}
	return systemNamespace + "-agents-system"
}

// ImportToken names the registration token of a manager-initiated import.
func ImportToken(cluster string) string {
	return Limit("import-token-"+cluster, MaxNameLength)
}

// AgentBundlePrefix begins the name of every agent Bundle. It is reserved:
// a Bundle a GitRepo or HelmOp would make under such a name could hold a
// cluster's agent Bundle name before the manager writes it, and freeze that
// cluster's agent settings and upgrades.
const AgentBundlePrefix = "fleet-agent-"

// AgentBundle names the agent Bundle of a Cluster (see
// controllers/agentbundle): fleet-agent-<cluster>, as in Fleet.
func AgentBundle(cluster string) string {
	return BundleName(AgentBundlePrefix + cluster)
}

// ReservedBundleName tells whether a bundle name is one only the manager
// gives: it begins with AgentBundlePrefix.
func ReservedBundleName(name string) bool {
	return strings.HasPrefix(name, AgentBundlePrefix)
}

// ReservedLabelDomain is the domain of the label keys fleet sets itself. A
// label under it (or a subdomain) that a tenant could set would stand for
// fleet's word: opt a Bundle into a BundleNamespaceMapping's selector, or
// mark it as an agent Bundle.
const ReservedLabelDomain = "fleet.cattle.io"

// ReservedLabelKey tells whether a label key is in ReservedLabelDomain or
// one of its subdomains, as Kubernetes reserves kubernetes.io and k8s.io.
func ReservedLabelKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	prefix = strings.ToLower(prefix)
	return prefix == ReservedLabelDomain || strings.HasSuffix(prefix, "."+ReservedLabelDomain)
}

// Limit cuts s to n characters, replacing the tail by a 5-hex hash of s so
// that different long names stay different.
func Limit(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.TrimRight(s[:n-6], "-.") + "-" + sha256Hex(s)[:5]
}

var (
	disallowed    = regexp.MustCompile(`[^a-z0-9-]+`)
	needsHash     = regexp.MustCompile(`[A-Z]|[^a-zA-Z0-9-]`)
	repeatedDash  = regexp.MustCompile(`-+`)
	slashPattern  = regexp.MustCompile(`/+`)
	leadingDotDir = regexp.MustCompile(`^(\./)+`)
)

// Bundle names the Bundle read from path below a GitRepo (or `fleet apply`)
// called base, as Fleet does: examples + single-cluster/helm gives
// examples-single-cluster-helm. See fleet-api.md for the rules.
func Bundle(base, path string) string {
	path = leadingDotDir.ReplaceAllString(path, "")
	path = strings.Trim(path, "/")
	input := base
	if path != "" && path != "." {
		input = base + "/" + path
	}
	return BundleName(input)
}

// BundleName turns any string into a valid bundle name.
func BundleName(input string) string {
	s := slashPattern.ReplaceAllString(input, "-")
	if needsHash.MatchString(s) {
		s = s + "-" + md5Hex(s)[:8]
	}
	s = strings.ToLower(s)
	s = disallowed.ReplaceAllString(s, "-")
	s = repeatedDash.ReplaceAllString(s, "-")
	s = strings.Trim(s, "-")
	if len(s) > MaxBundleNameLength {
		head := s[:47]
		if !strings.HasSuffix(head, "-") {
			head += "-"
		}
		s = head + md5Hex(s)[:5]
	}
	if s == "" {
		return md5Hex(input)[:24]
	}
	return s
}
