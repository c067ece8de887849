package recipients_test

import (
	"crypto/ecdh"
	"crypto/rand"
	"testing"

	"filippo.io/age"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/recipients"
	"github.com/gitfleet/fleet/internal/sealing"
)

func cluster(name string, l map[string]string) fleet.Cluster {
	return fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name, Labels: l}}
}

func group(name string, sel *metav1.LabelSelector) fleet.ClusterGroup {
	return fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name}, Spec: fleet.ClusterGroupSpec{Selector: sel}}
}

func TestPick(t *testing.T) {
	clusters := []fleet.Cluster{
		cluster("prod-b", map[string]string{"env": "prod"}),
		cluster("dev", map[string]string{"env": "dev"}),
		cluster("prod-a", map[string]string{"env": "prod", "region": "eu"}),
		cluster("edge", map[string]string{"tier": "edge"}),
	}
	names := func(cs []fleet.Cluster) []string {
		out := make([]string, 0, len(cs))
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		sel    string
		groups []fleet.ClusterGroup
		want   []string
	}{
		{"a selector, sorted by name", "env=prod", nil, []string{"prod-a", "prod-b"}},
		{"a group", "", []fleet.ClusterGroup{group("edge", &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}})}, []string{"edge"}},
		{"a selector and a group, each cluster once", "env=prod", []fleet.ClusterGroup{
			group("eu", &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}),
		}, []string{"prod-a", "prod-b"}},
		{"a group without a selector picks none", "", []fleet.ClusterGroup{group("none", nil)}, []string{}},
		{"a group with {} picks all", "", []fleet.ClusterGroup{group("all", &metav1.LabelSelector{})}, []string{"dev", "edge", "prod-a", "prod-b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var sel labels.Selector
			if tc.sel != "" {
				var err error
				sel, err = labels.Parse(tc.sel)
				g.Expect(err).NotTo(HaveOccurred())
			}
			got, err := recipients.Pick(clusters, sel, tc.groups)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(names(got)).To(Equal(tc.want))
		})
	}
}

func TestOf(t *testing.T) {
	g := NewWithT(t)
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		fleet.SealingKeyAnnotation: sealing.EncodePublicKey(k.PublicKey()),
	}}}
	r, err := recipients.Of(lease)
	g.Expect(err).NotTo(HaveOccurred())
	parsed, err := age.ParseX25519Recipient(r)
	g.Expect(err).NotTo(HaveOccurred(), "an age recipient")
	g.Expect(parsed.String()).To(Equal(r))

	_, err = recipients.Of(nil)
	g.Expect(err).To(MatchError(ContainSubstring("not checked in")))
	_, err = recipients.Of(&coordinationv1.Lease{})
	g.Expect(err).To(MatchError(ContainSubstring("has not published a sealing key")))
}

func TestStringsAreDistinct(t *testing.T) {
	g := NewWithT(t)
	res := recipients.Result{Recipients: []recipients.Recipient{{Cluster: "a", Recipient: "age1x"}, {Cluster: "b", Recipient: "age1y"}, {Cluster: "c", Recipient: "age1x"}}}
	g.Expect(res.Strings()).To(Equal([]string{"age1x", "age1y"}))
}
