package localcluster

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// The names, labels and selector are those of Fleet's bootstrap
// (internal/cmd/controller/agentmanagement/controllers/bootstrap in
// rancher/fleet): Cluster "local" labelled name=local naming the Secret
// "local-cluster" (label fleet.cattle.io/managed=true, keys apiServerURL and
// apiServerCA), ClusterGroup "default" selecting matchLabels name=local.
func TestObjectsHaveFleetsNamesLabelsAndSelector(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\n")
	for _, tc := range []struct {
		name     string
		ca       []byte
		wantKeys []string
	}{
		{name: "with a CA", ca: ca, wantKeys: []string{fleet.KubeConfigSecretAPIServerURLKey, fleet.KubeConfigSecretAPIServerCAKey}},
		{name: "without a CA", wantKeys: []string{fleet.KubeConfigSecretAPIServerURLKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := Objects("fleet-local", "https://10.0.0.1:443", tc.ca)
			g.Expect(objs).To(HaveLen(3))

			secret := objs[0].(*corev1.Secret)
			g.Expect(secret.Namespace).To(Equal("fleet-local"))
			g.Expect(secret.Name).To(Equal("local-cluster"))
			g.Expect(secret.Labels).To(Equal(map[string]string{"fleet.cattle.io/managed": "true"}))
			g.Expect(secret.Data).To(HaveLen(len(tc.wantKeys)))
			g.Expect(secret.Data).To(HaveKeyWithValue("apiServerURL", []byte("https://10.0.0.1:443")))
			if tc.ca != nil {
				g.Expect(secret.Data).To(HaveKeyWithValue("apiServerCA", tc.ca))
			}
			g.Expect(secret.Data).NotTo(HaveKey("value"), "no credential: the manager installs with its own connection")

			cluster := objs[1].(*fleet.Cluster)
			g.Expect(cluster.Namespace).To(Equal("fleet-local"))
			g.Expect(cluster.Name).To(Equal("local"))
			g.Expect(cluster.Labels).To(Equal(map[string]string{"name": "local"}))
			g.Expect(cluster.Spec).To(Equal(fleet.ClusterSpec{KubeConfigSecret: "local-cluster"}))

			group := objs[2].(*fleet.ClusterGroup)
			g.Expect(group.Namespace).To(Equal("fleet-local"))
			g.Expect(group.Name).To(Equal("default"))
			g.Expect(group.Name).To(Equal(fleet.DefaultClusterGroup), "the group of the default target")
			g.Expect(group.Spec.Selector).To(Equal(&metav1.LabelSelector{MatchLabels: map[string]string{"name": "local"}}))
			sel, err := metav1.LabelSelectorAsSelector(group.Spec.Selector)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sel.Matches(labels.Set(cluster.Labels))).To(BeTrue(), "the default group selects the local Cluster")
		})
	}
}
