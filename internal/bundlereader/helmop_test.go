package bundlereader

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/test/chartrepo"
)

func ociChart(version string) chartrepo.Chart {
	return chartrepo.Chart{Name: "app", Version: version, Values: "x: 1\n",
		Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"}}
}

// Charts in an OCI registry (served on loopback, pushed with Helm's
// registry client) resolve against the registry's tags and are pulled into
// the bundle.
func TestRemoteChartFromOCIRegistry(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := chartrepo.NewRegistry()
	defer reg.Close()
	g.Expect(reg.Push("charts/app", ociChart("1.0.0"), ociChart("1.1.0"), ociChart("2.0.0"))).To(Succeed())
	ref := reg.Ref("charts/app")
	trusted := &HelmAuth{CABundle: reg.CA}

	v, err := ResolveChartVersion(ctx, ChartSource{Repo: ref, Version: "1.x"}, trusted, 0, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal("1.1.0"))
	v, err = ResolveChartVersion(ctx, ChartSource{Chart: ref}, &HelmAuth{InsecureSkipVerify: true}, 0, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal("2.0.0"), "no version: the newest")

	_, err = ResolveChartVersion(ctx, ChartSource{Repo: ref, Version: "3.x"}, trusted, 0, nil)
	g.Expect(errors.Is(err, ErrVersionNotFound)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("available: 2.0.0, 1.1.0, 1.0.0")))
	_, err = ResolveChartVersion(ctx, ChartSource{Repo: ref, Version: "banana"}, trusted, 0, nil)
	g.Expect(errors.Is(err, ErrInvalidVersion)).To(BeTrue(), "%v", err)
	g.Expect(outcome.IsStalling(err)).To(BeTrue())
	_, err = ResolveChartVersion(ctx, ChartSource{Repo: ref, Version: "1.x"}, nil, 0, nil)
	g.Expect(err).To(MatchError(ContainSubstring("certificate")), "the registry's CA is not trusted by default")
	g.Expect(outcome.IsStalling(err)).To(BeFalse())

	b, err := ReadRemoteChart(ctx, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{
		Helm: &fleet.HelmOptions{Repo: ref, Version: "1.1.0"}}}, Options{Name: "app", Namespace: "ns", HelmAuth: trusted})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Spec.Helm.Chart).To(Equal("app"))
	g.Expect(b.Spec.Helm.Repo).To(BeEmpty())
	var chartYAML string
	for _, r := range b.Spec.Resources {
		if r.Name == "app/Chart.yaml" {
			chartYAML = r.Content
		}
	}
	g.Expect(chartYAML).To(ContainSubstring("version: 1.1.0"))
	g.Expect(b.Spec.Targets).To(Equal([]fleet.BundleTarget{DefaultTarget()}))
}

func TestResolveChartVersionInRepository(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo, err := chartrepo.New([]chartrepo.Chart{ociChart("0.9.0"), ociChart("1.0.0"), ociChart("1.0.1-rc.1")}, chartrepo.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	defer repo.Close()
	for version, want := range map[string]string{"": "1.0.0", "*": "1.0.0", "< 1": "0.9.0", "1.0.0": "1.0.0", ">= 1.0.1-0": "1.0.1-rc.1"} {
		v, err := ResolveChartVersion(ctx, ChartSource{Repo: repo.URL, Chart: "app", Version: version}, nil, 0, nil)
		g.Expect(err).NotTo(HaveOccurred(), version)
		g.Expect(v).To(Equal(want), version)
	}
	_, err = ResolveChartVersion(ctx, ChartSource{Repo: repo.URL, Chart: "app", Version: "2.0.0"}, nil, 0, nil)
	g.Expect(errors.Is(err, ErrVersionNotFound)).To(BeTrue(), "%v", err)
	v, err := ResolveChartVersion(ctx, ChartSource{Chart: repo.URL + "/app-1.0.0.tgz"}, nil, 0, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(BeEmpty(), "a chart URL has no version to resolve")
}
