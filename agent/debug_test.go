package agent

import (
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, url, verb, resource string
	}{
		{"GET", "/apis/fleet.cattle.io/v1alpha1/namespaces/c1/bundledeployments?watch=true&resourceVersion=5", "WATCH", "bundledeployments"},
		{"GET", "/apis/fleet.cattle.io/v1alpha1/namespaces/c1/bundledeployments?watch=true&sendInitialEvents=true", "WATCHLIST", "bundledeployments"},
		{"GET", "/apis/fleet.cattle.io/v1alpha1/namespaces/c1/bundledeployments?limit=500", "LIST", "bundledeployments"},
		{"GET", "/apis/fleet.cattle.io/v1alpha1/namespaces/c1/contents/s-1", "GET", "contents"},
		{"GET", "/apis/fleet.cattle.io/v1alpha1/contents/s-1", "GET", "contents"},
		{"PATCH", "/apis/fleet.cattle.io/v1alpha1/namespaces/ws/clusters/c/status", "PATCH", "clusters/status"},
		{"GET", "/api/v1/namespaces/c1/secrets/s", "GET", "secrets"},
		{"POST", "/api/v1/namespaces/c1/serviceaccounts/a/token", "POST", "serviceaccounts/token"},
		{"GET", "/version", "GET", "other"},
	} {
		req, err := http.NewRequest(tc.method, "https://example.invalid"+tc.url, nil)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		verb, resource := classify(req)
		NewWithT(t).Expect([]string{verb, resource}).To(Equal([]string{tc.verb, tc.resource}), tc.url)
	}
}
