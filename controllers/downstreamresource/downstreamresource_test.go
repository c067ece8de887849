package downstreamresource

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/sealing"
)

func TestEqualSeal(t *testing.T) {
	key, err := sealing.NewKey()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	pub := key.PublicKey()
	have := &fleet.SealedResources{Recipient: "r", Sources: []string{"Secret/a u 1"}, Data: "v1.x"}
	for _, tc := range []struct {
		name  string
		have  *fleet.SealedResources
		want  *want
		equal bool
	}{
		{"nothing named, nothing sealed", nil, nil, true},
		{"nothing named any more", have, nil, false},
		{"no key published: left as it is", have, &want{SealedResources: have}, true},
		{"same versions and key", have, &want{SealedResources: &fleet.SealedResources{Recipient: "r", Sources: []string{"Secret/a u 1"}}, key: pub}, true},
		{"a source changed", have, &want{SealedResources: &fleet.SealedResources{Recipient: "r", Sources: []string{"Secret/a u 2"}}, key: pub}, false},
		{"a new key", have, &want{SealedResources: &fleet.SealedResources{Recipient: "s", Sources: []string{"Secret/a u 1"}}, key: pub}, false},
		{"a source went missing", have, &want{SealedResources: &fleet.SealedResources{Recipient: "r", Sources: []string{"Secret/a u 1"}, Missing: []string{"Secret/b"}}, key: pub}, false},
		{"never sealed", nil, &want{SealedResources: &fleet.SealedResources{Recipient: "r"}, key: pub}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(equalSeal(tc.have, tc.want)).To(Equal(tc.equal))
		})
	}
}

func TestSourceKeys(t *testing.T) {
	g := NewWithT(t)
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fleet.BundleNamespaceLabel: "ws"}},
		Spec: fleet.BundleDeploymentSpec{Options: fleet.BundleDeploymentOptions{DownstreamResources: []fleet.DownstreamResource{
			{Kind: "Secret", Name: "a"}, {Kind: "ConfigMap", Name: "a"},
		}}},
	}
	g.Expect(sourceKeys(bd)).To(Equal([]string{"ws/Secret/a", "ws/ConfigMap/a"}))
	bd.Labels = nil
	g.Expect(sourceKeys(bd)).To(BeEmpty())
}

func TestKeptDropsKubectlsCopyOfTheValues(t *testing.T) {
	g := NewWithT(t)
	g.Expect(kept(map[string]string{
		"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"c2VjcmV0"}}`,
		"fleet.cattle.io/x": "y", "team": "db",
	})).To(Equal(map[string]string{"team": "db"}))
	g.Expect(kept(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"})).To(BeNil())
}
