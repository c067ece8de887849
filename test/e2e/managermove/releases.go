package managermove

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// releases are Helm's release records in the release namespace, by name.
func releases(ctx context.Context, c client.Client) map[string]types.UID {
	GinkgoHelper()
	list := &corev1.SecretList{}
	Expect(c.List(ctx, list, client.InNamespace(releaseNS), client.MatchingLabels{"owner": "helm"})).To(Succeed())
	out := map[string]types.UID{}
	for _, s := range list.Items {
		out[s.Name] = s.UID
	}
	return out
}
