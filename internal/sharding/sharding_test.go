package sharding

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func repo(l map[string]string) *fleet.GitRepo {
	return &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "fleet-default", Labels: l}}
}

func TestOwnsAndSelector(t *testing.T) {
	unlabelled := map[string]string{"team": "a"}
	one := map[string]string{fleet.ShardRefLabel: "one"}
	empty := map[string]string{fleet.ShardRefLabel: ""}
	for _, tc := range []struct {
		shard  string
		labels map[string]string
		want   bool
	}{
		{"", nil, true},
		{"", unlabelled, true},
		{"", one, false},
		// An empty label is still a shard reference: the default shard
		// leaves it, as Fleet's filter does.
		{"", empty, false},
		{"one", one, true},
		{"one", unlabelled, false},
		{"two", one, false},
		{"one", empty, false},
	} {
		g := NewWithT(t)
		g.Expect(Owns(tc.shard, repo(tc.labels))).To(Equal(tc.want), "shard %q, labels %v", tc.shard, tc.labels)
		g.Expect(Selector(tc.shard).Matches(labels.Set(tc.labels))).To(Equal(tc.want), "selector of shard %q, labels %v", tc.shard, tc.labels)
		p := Predicate(tc.shard)
		g.Expect(p.Create(event.CreateEvent{Object: repo(tc.labels)})).To(Equal(tc.want))
		g.Expect(p.Update(event.UpdateEvent{ObjectOld: repo(nil), ObjectNew: repo(tc.labels)})).To(Equal(tc.want))
		g.Expect(p.Delete(event.DeleteEvent{Object: repo(tc.labels)})).To(Equal(tc.want))
	}
}

func TestValidate(t *testing.T) {
	g := NewWithT(t)
	for _, ok := range []string{"", "shard1", "Shard_1.a", strings.Repeat("a", 63)} {
		g.Expect(Validate(ok)).To(Succeed(), ok)
	}
	for _, bad := range []string{"-a", "a b", "shard/1", strings.Repeat("a", 64), "a_"} {
		err := Validate(bad)
		g.Expect(err).To(HaveOccurred(), bad)
		g.Expect(err.Error()).To(ContainSubstring(fleet.ShardRefLabel))
		g.Expect(err.Error()).To(ContainSubstring(bad))
	}
}

func TestLeaderElectionID(t *testing.T) {
	g := NewWithT(t)
	const base = "fleet-manager.fleet.cattle.io"
	g.Expect(LeaderElectionID(base, "")).To(Equal(base))
	g.Expect(LeaderElectionID(base, "one")).To(Equal("shard-one." + base))
	seen := map[string]string{}
	for _, id := range []string{"one", "One", "o_ne", "o.ne", "ONE", strings.Repeat("a", 63), strings.Repeat("a", 62) + "b", "x-" + strings.Repeat("Z", 61)} {
		got := LeaderElectionID(base, id)
		g.Expect(validation.IsDNS1123Subdomain(got)).To(BeEmpty(), "%q from shard %q is no valid Lease name", got, id)
		g.Expect(seen).NotTo(HaveKey(got), "shards %q and %q share a Lease", seen[got], id)
		seen[got] = id
	}
}
