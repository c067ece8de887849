package localcluster

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Labels are the local Cluster's labels: name=local, which the default
// ClusterGroup selects (Fleet's bootstrap gives the same).
func Labels() map[string]string {
	return map[string]string{fleet.LocalClusterLabel: fleet.LocalClusterName}
}

// Objects are the objects kept in namespace for the manager's own cluster,
// with only the fields the manager sets (it applies them and owns just
// those): the Secret first, so the Cluster that names it finds it.
//
// apiServerURL and apiServerCA, the Secret's only data, tell the local
// agent how to reach the manager. The Secret has no kubeconfig ("value"):
// the manager installs the agent through its own connection.
func Objects(namespace, apiServerURL string, apiServerCA []byte) []client.Object {
	data := map[string][]byte{fleet.KubeConfigSecretAPIServerURLKey: []byte(apiServerURL)}
	if len(apiServerCA) > 0 {
		data[fleet.KubeConfigSecretAPIServerCAKey] = apiServerCA
	}
	return []client.Object{
		&corev1.Secret{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: fleet.LocalClusterSecretName, Namespace: namespace,
				// The manager's cache holds only the Secrets carrying this label.
				Labels: map[string]string{fleet.ManagedLabel: "true"}},
			Data: data,
		},
		&fleet.Cluster{
			TypeMeta:   metav1.TypeMeta{APIVersion: fleet.GroupVersion.String(), Kind: "Cluster"},
			ObjectMeta: metav1.ObjectMeta{Name: fleet.LocalClusterName, Namespace: namespace, Labels: Labels()},
			Spec:       fleet.ClusterSpec{KubeConfigSecret: fleet.LocalClusterSecretName},
		},
		&fleet.ClusterGroup{
			TypeMeta:   metav1.TypeMeta{APIVersion: fleet.GroupVersion.String(), Kind: "ClusterGroup"},
			ObjectMeta: metav1.ObjectMeta{Name: fleet.DefaultClusterGroup, Namespace: namespace},
			Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: Labels()}},
		},
	}
}
