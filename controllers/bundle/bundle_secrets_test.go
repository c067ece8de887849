package bundle

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// The Secret a bundle's agent Secrets come from: a HelmOp's secretName, the
// registry Secret its annotation names, the namespace's OCI storage Secret,
// or none.
func TestAgentSecretSource(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "b", Namespace: "tenant"}
	for _, tc := range []struct {
		name string
		b    fleet.Bundle
		want string
	}{
		{"content in etcd", fleet.Bundle{ObjectMeta: meta}, ""},
		{"helmop without secret", fleet.Bundle{ObjectMeta: meta, Spec: fleet.BundleSpec{HelmOpOptions: &fleet.BundleHelmOptions{}}}, ""},
		{"helmop", fleet.Bundle{ObjectMeta: meta, Spec: fleet.BundleSpec{HelmOpOptions: &fleet.BundleHelmOptions{SecretName: "creds"}}}, "tenant/creds"},
		{"oci, namespace default", fleet.Bundle{ObjectMeta: meta, Spec: fleet.BundleSpec{ContentsID: "s-abc"}}, "tenant/" + fleet.OCIStorageDefaultSecretName},
		{"oci, annotation", fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "tenant",
			Annotations: map[string]string{fleet.OCIStorageSecretAnnotation: "fleet-system/registry"}}, Spec: fleet.BundleSpec{ContentsID: "s-abc"}}, "fleet-system/registry"},
	} {
		if got := agentSecretSource(&tc.b); got != tc.want {
			t.Errorf("%s: agentSecretSource = %q, want %q", tc.name, got, tc.want)
		}
	}
}
