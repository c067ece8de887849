package deployer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	"github.com/gitfleet/fleet/agent/deployrpc"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// PulledChartFile is the name the chart a HelmOp's BundleDeployment names
// gets among the files deployed, once downloaded.
const PulledChartFile = "chart.tgz"

// maxChartBytes bounds one download (an index or a packaged chart): the
// child's memory bound is some hundreds of MB.
const maxChartBytes = 64 << 20

// pullTimeout bounds the download of one chart, index included.
const pullTimeout = 2 * time.Minute

// downloadRetry is how long a BundleDeployment whose chart could not be
// downloaded waits before the agent tries again.
const downloadRetry = 30 * time.Second

// PullChart downloads the chart src names, as Fleet's agent does for a
// BundleDeployment with helmChartOptions, and returns it as the bundle's
// files with opts pointing helm.chart at it (opts is not changed). A failed
// download is a Waiting error with fleet.ReasonChartDownloadFailed naming
// the repository and what to check: it is tried again after a while.
//
// With cacheDir set, the chart is kept there and taken from there the next
// time (see chartCache); "" downloads every time.
func PullChart(ctx context.Context, src deployrpc.ChartSource, opts fleet.BundleDeploymentOptions, cacheDir string) (Files, fleet.BundleDeploymentOptions, error) {
	cache := chartCache{dir: cacheDir}
	tgz, ok := cache.get(src)
	if ok && !loads(tgz) {
		cache.drop(src)
		ok = false
	}
	if !ok {
		ctx, cancel := context.WithTimeout(ctx, pullTimeout)
		defer cancel()
		var err error
		tgz, err = download(ctx, src)
		if err == nil && !loads(tgz) {
			// A chart that does not load is not deployed: the same error
			// as a bundle's own broken chart, but naming where it came
			// from.
			_, lerr := loader.LoadArchive(bytes.NewReader(tgz))
			err = fmt.Errorf("not a packaged chart: %w", lerr)
		}
		if err != nil {
			return nil, opts, downloadFailed(src, err)
		}
		cache.put(src, tgz)
	}
	out := *opts.DeepCopy()
	if out.Helm == nil {
		out.Helm = &fleet.HelmOptions{}
	}
	out.Helm.Chart, out.Helm.Repo, out.Helm.Version = PulledChartFile, "", ""
	return Files{PulledChartFile: tgz}, out, nil
}

// loads tells whether tgz is a packaged chart Helm loads.
func loads(tgz []byte) bool {
	_, err := loader.LoadArchive(bytes.NewReader(tgz))
	return err == nil
}

// downloadFailed says which chart could not be downloaded, from where, and
// what to check.
func downloadFailed(src deployrpc.ChartSource, err error) error {
	creds := "the HelmOp's helmSecretName, if the repository needs credentials" //nolint:gosec // G101: a message, not a credential
	if src.SecretName != "" {
		creds = "the credentials of the HelmOp's helmSecretName (copied to Secret " + src.SecretName + ")"
	}
	return outcome.Waitf(fleet.ReasonChartDownloadFailed, downloadRetry,
		"downloading chart %s from %s: %v: check that the repository is reachable from this cluster, %s, and insecureSkipTLSVerify or cacerts for its certificate; the agent tries again",
		chartLabel(src), sourceURL(src), err, creds)
}

// chartLabel is the chart and version, for messages.
func chartLabel(src deployrpc.ChartSource) string {
	name := src.Chart
	if ref := ociRef(src); ref != "" {
		name = ref[strings.LastIndex(ref, "/")+1:]
	} else if strings.Contains(name, "://") {
		name = name[strings.LastIndex(name, "/")+1:]
	}
	if src.Version != "" {
		return name + " " + src.Version
	}
	return name
}

// sourceURL is where src's chart comes from: its repository, registry
// reference or URL.
func sourceURL(src deployrpc.ChartSource) string {
	if ref := ociRef(src); ref != "" {
		return ref
	}
	if src.Repo != "" {
		return src.Repo
	}
	return src.Chart
}

// ociRef is the oci:// reference of src, "" when it is not in a registry.
func ociRef(src deployrpc.ChartSource) string {
	switch {
	case strings.HasPrefix(src.Chart, "oci://"):
		return strings.TrimSuffix(src.Chart, "/")
	case strings.HasPrefix(src.Repo, "oci://"):
		if src.Chart == "" {
			return strings.TrimSuffix(src.Repo, "/")
		}
		return strings.TrimSuffix(src.Repo, "/") + "/" + src.Chart
	}
	return ""
}

// download fetches the packaged chart src names.
func download(ctx context.Context, src deployrpc.ChartSource) ([]byte, error) {
	hc, err := httpClient(src)
	if err != nil {
		return nil, err
	}
	defer hc.CloseIdleConnections()
	if ref := ociRef(src); ref != "" {
		return pullOCI(hc, src, ref)
	}
	if src.Repo == "" {
		if !strings.Contains(src.Chart, "://") {
			return nil, errors.New("options.helm names no repository and no chart URL")
		}
		return get(ctx, hc, src, src.Chart, src.Chart)
	}
	if src.Chart == "" {
		return nil, errors.New("options.helm.chart is empty: no chart to download from the repository")
	}
	indexURL, err := repo.ResolveReferenceURL(src.Repo, "index.yaml")
	if err != nil {
		return nil, err
	}
	raw, err := get(ctx, hc, src, src.Repo, indexURL)
	if err != nil {
		return nil, fmt.Errorf("reading the repository's index: %w", err)
	}
	index := &repo.IndexFile{}
	if err := yaml.Unmarshal(raw, index); err != nil {
		return nil, fmt.Errorf("reading the repository's index.yaml: %w", err)
	}
	index.SortEntries()
	cv, err := index.Get(src.Chart, src.Version)
	if err != nil {
		return nil, fmt.Errorf("the repository's index.yaml has no chart %s version %s", src.Chart, src.Version)
	}
	if len(cv.URLs) == 0 {
		return nil, fmt.Errorf("chart %s %s has no download URL in the index", src.Chart, cv.Version)
	}
	chartURL, err := repo.ResolveReferenceURL(src.Repo, cv.URLs[0])
	if err != nil {
		return nil, err
	}
	tgz, err := get(ctx, hc, src, src.Repo, chartURL)
	if err != nil {
		return nil, err
	}
	if cv.Digest != "" {
		sum := sha256.Sum256(tgz)
		if got := hex.EncodeToString(sum[:]); !strings.EqualFold(got, cv.Digest) {
			return nil, fmt.Errorf("%s: digest %s does not match the index's %s", chartURL, got, cv.Digest)
		}
	}
	return tgz, nil
}

// pullOCI pulls ref at src.Version from its registry.
func pullOCI(hc *http.Client, src deployrpc.ChartSource, ref string) ([]byte, error) {
	if src.Version == "" {
		return nil, errors.New("no version: an OCI chart is pulled by its tag")
	}
	opts := []registry.ClientOption{registry.ClientOptHTTPClient(hc), registry.ClientOptWriter(io.Discard)}
	if src.Username != "" || src.Password != "" {
		opts = append(opts, registry.ClientOptBasicAuth(src.Username, src.Password))
	}
	c, err := registry.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	// Registries do not allow "+" in tags; Helm pushes it as "_".
	res, err := c.Pull(strings.TrimPrefix(ref, "oci://") + ":" + strings.ReplaceAll(src.Version, "+", "_"))
	if err != nil {
		return nil, err
	}
	return res.Chart.Data, nil
}

// httpClient reaches src's repository with its TLS settings, every response
// bounded, with a redirect never carrying the credentials to another host.
func httpClient(src deployrpc.ChartSource) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: src.InsecureSkipTLSVerify} //nolint:gosec // G402: the user asked for it (insecureSkipTLSVerify)
	if len(src.CABundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(src.CABundle) {
			return nil, errors.New("the Secret's cacerts holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConfig
	return &http.Client{Transport: limitedBodies{tr}, Timeout: pullTimeout}, nil
}

// limitedBodies bounds every response body to maxChartBytes.
type limitedBodies struct{ http.RoundTripper }

func (l limitedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.RoundTripper.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, maxChartBytes+1), resp.Body}
	return resp, nil
}

// get downloads u, sending src's credentials only when u is on the host of
// base (the repository or chart URL).
func get(ctx context.Context, hc *http.Client, src deployrpc.ChartSource, base, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "fleet-agent")
	if (src.Username != "" || src.Password != "") && sameHost(base, u) {
		req.SetBasicAuth(src.Username, src.Password)
	}
	// Go drops the Authorization header on a redirect to another host.
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(data) > maxChartBytes {
		return nil, fmt.Errorf("GET %s: larger than %d MiB", u, maxChartBytes>>20)
	}
	return data, nil
}

// sameHost tells whether a and b are URLs of one host (and port).
func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host != "" && strings.EqualFold(ua.Host, ub.Host)
}
