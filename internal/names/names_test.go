package names

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestBundle(t *testing.T) {
	cases := []struct{ base, path, want string }{
		{"examples", "single-cluster/helm", "examples-single-cluster-helm"},
		{"examples", ".", "examples"},
		{"examples", "./multi/", "examples-multi"},
		{"repo", "Charts/App", ""}, // upper case: hashed suffix
		{"repo", "a_b/c.d", ""},    // disallowed characters: hashed suffix
		{"r", strings.Repeat("very-long-path/", 8), ""},
	}
	for _, tc := range cases {
		g := NewWithT(t)
		got := Bundle(tc.base, tc.path)
		if tc.want != "" {
			g.Expect(got).To(Equal(tc.want))
		}
		g.Expect(validation.IsDNS1123Label(got)).To(BeEmpty(), got)
		g.Expect(len(got)).To(BeNumerically("<=", MaxBundleNameLength))
		g.Expect(Bundle(tc.base, tc.path)).To(Equal(got), "names are stable")
	}
	g := NewWithT(t)
	g.Expect(Bundle("repo", "Charts/App")).To(HavePrefix("repo-charts-app-"))
	g.Expect(Bundle("repo", "Charts/App")).NotTo(Equal(Bundle("repo", "charts/app")))
	g.Expect(BundleName("")).To(HaveLen(24))
	g.Expect(validation.IsDNS1123Label(BundleName("___"))).To(BeEmpty())
}

func TestClusterNamespace(t *testing.T) {
	g := NewWithT(t)
	ns := ClusterNamespace("fleet-default", "edge-1")
	g.Expect(ns).To(MatchRegexp(`^cluster-fleet-default-edge-1-[0-9a-f]{12}$`))
	long := ClusterNamespace("fleet-default", strings.Repeat("c", 60))
	g.Expect(long).To(HaveLen(63))
	g.Expect(validation.IsDNS1123Label(long)).To(BeEmpty())
	g.Expect(ClusterNamespace("a", "b-c")).NotTo(Equal(ClusterNamespace("a-b", "c")))
	g.Expect(long).To(MatchRegexp(`-[0-9a-f]{16}$`), "a 64-bit hash for long names")

	// Short names did not change; long ones did, and a Cluster that recorded
	// its legacy namespace keeps it, while nothing else recorded is followed.
	g.Expect(LegacyClusterNamespace("fleet-default", "edge-1")).To(Equal(ns))
	legacy := LegacyClusterNamespace("fleet-default", strings.Repeat("c", 60))
	g.Expect(legacy).To(HaveLen(63))
	g.Expect(legacy).NotTo(Equal(long))
	g.Expect(ClusterNamespaceFor("fleet-default", strings.Repeat("c", 60), legacy)).To(Equal(legacy))
	g.Expect(ClusterNamespaceFor("fleet-default", strings.Repeat("c", 60), "")).To(Equal(long))
	g.Expect(ClusterNamespaceFor("fleet-default", "edge-1", "cluster-fleet-default-victim")).To(Equal(ns))
}

func TestOthers(t *testing.T) {
	g := NewWithT(t)
	g.Expect(SystemRegistrationNamespace("fleet-system")).To(Equal("fleet-clusters-system"))
	g.Expect(SystemRegistrationNamespace("cattle-fleet-system")).To(Equal("cattle-fleet-clusters-system"))
	g.Expect(ClusterForClientID("uid")).To(MatchRegexp(`^cluster-[0-9a-f]{12}$`))
	g.Expect(Content([]byte(`{}`))).To(HaveLen(63))
	g.Expect(Content([]byte(`{}`))).To(HavePrefix("s-"))
	g.Expect(CredentialSecret("a", "b")).To(HavePrefix("c-"))
	g.Expect(ImportToken(strings.Repeat("x", 80))).To(HaveLen(63))
	sa := AgentServiceAccount("ws", "c", "id", "random")
	g.Expect(sa).To(MatchRegexp(`^fleet-agent-[0-9a-f]{16}$`))
	g.Expect(AgentServiceAccount("ws", "c", "id", "random2")).NotTo(Equal(sa))

	// Registration tokens' ServiceAccounts share one namespace: the token's
	// namespace is part of the name, and the hash keeps apart what joining
	// with "-" would not.
	g.Expect(RegistrationTokenServiceAccount("fleet-default", "edge")).To(MatchRegexp(`^token-fleet-default-edge-[0-9a-f]{16}$`))
	g.Expect(RegistrationTokenServiceAccount("a-b", "c")).NotTo(Equal(RegistrationTokenServiceAccount("a", "b-c")))
	long := RegistrationTokenServiceAccount(strings.Repeat("n", 63), strings.Repeat("t", 253))
	g.Expect(len(long)).To(BeNumerically("<=", 63))
	g.Expect(long).To(MatchRegexp(`^token-n+-[0-9a-f]{16}$`))
}

func TestReserved(t *testing.T) {
	g := NewWithT(t)
	for _, cluster := range []string{"c", "local", strings.Repeat("long", 20)} {
		g.Expect(ReservedBundleName(AgentBundle(cluster))).To(BeTrue(), "the agent Bundle of %s", cluster)
	}
	g.Expect(ReservedBundleName("fleet-agent")).To(BeFalse())
	g.Expect(ReservedBundleName("my-fleet-agent-x")).To(BeFalse())

	for key, want := range map[string]bool{
		"fleet.cattle.io/repo-name":     true,
		"fleet.cattle.io/anything":      true,
		"x.fleet.cattle.io/y":           true,
		"Fleet.Cattle.IO/y":             true,
		"fleet.cattle.io":               false, // a name without a prefix
		"notfleet.cattle.io/y":          false,
		"fleet.cattle.io.example.com/y": false,
		"team":                          false,
		"example.com/fleet.cattle.io":   false,
	} {
		g.Expect(ReservedLabelKey(key)).To(Equal(want), key)
	}
}
