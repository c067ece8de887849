package bundlereader

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/test/chartrepo"
)

// Every download goes through the Dialer of the options: a chart
// repository, a chart URL, a redirect to either, and an OCI registry on an
// address the policy refuses get no request, and the error says it was
// refused. The repository and registry (on 127.0.0.1) are denied; a
// redirector on 127.0.0.2 is allowed.
func TestDownloadsConnectUnderThePolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo, err := chartrepo.New([]chartrepo.Chart{ociChart("1.0.0")}, chartrepo.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	defer repo.Close()
	reg := chartrepo.NewRegistry()
	defer reg.Close()
	g.Expect(reg.Push("charts/app", ociChart("1.0.0"))).To(Succeed())
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	g.Expect(err).NotTo(HaveOccurred())
	redirector := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, repo.URL+r.URL.Path, http.StatusFound)
	})}}
	redirector.Start()
	defer redirector.Close()
	dialer := egress.NewDialer(egress.Policy{
		Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Deny:  []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	})
	refused := func(err error) {
		g.Expect(errors.Is(err, egress.ErrRefused)).To(BeTrue(), "%v", err)
		g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonDestinationRefused))
	}
	ociAuth := &HelmAuth{CABundle: reg.CA}

	for _, src := range []ChartSource{
		{Repo: repo.URL, Chart: "app", Version: "1.x"},
		{Repo: redirector.URL, Chart: "app", Version: "1.x"},
	} {
		_, err := ResolveChartVersion(ctx, src, nil, 0, dialer)
		refused(err)
	}
	_, err = ResolveChartVersion(ctx, ChartSource{Repo: reg.Ref("charts/app"), Version: "1.x"}, ociAuth, 0, dialer)
	refused(err)
	for _, h := range []*fleet.HelmOptions{
		{Chart: repo.URL + "/app-1.0.0.tgz"},
		{Chart: redirector.URL + "/app-1.0.0.tgz"},
		{Repo: redirector.URL, Chart: "app", Version: "1.0.0"},
	} {
		_, err := ReadRemoteChart(ctx, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: h}},
			Options{Name: "app", Namespace: "ns", Dialer: dialer})
		refused(err)
	}
	_, err = ReadRemoteChart(ctx, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{
		Helm: &fleet.HelmOptions{Repo: reg.Ref("charts/app"), Version: "1.0.0"}}}, Options{Name: "app", Namespace: "ns", HelmAuth: ociAuth, Dialer: dialer})
	refused(err)
	n, _ := repo.Requests()
	g.Expect(n).To(BeZero(), "the denied repository was asked")

	v, err := ResolveChartVersion(ctx, ChartSource{Repo: redirector.URL, Chart: "app", Version: "1.x"}, nil, 0, egress.NewDialer(egress.AllowLoopback()))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal("1.0.0"))
}
