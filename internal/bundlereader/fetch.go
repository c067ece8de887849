package bundlereader

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	"github.com/gitfleet/fleet/internal/egress"
)

// defaultFetchTimeout bounds one download when the context has no deadline.
const defaultFetchTimeout = 2 * time.Minute

// fetchedChart is a chart downloaded and unpacked.
type fetchedChart struct {
	ref     string // where it came from, without version
	name    string
	version string
	files   []*loader.BufferedFile // named relative to the chart directory
	archive []byte                 // the packaged chart as downloaded
}

// fetcher downloads charts from Helm repositories, OCI registries and
// URLs with the Helm SDK.
type fetcher struct {
	auth *HelmAuth
	// maxBytes bounds every response body.
	maxBytes int64
	// dialer makes every connection; nil connects anywhere.
	dialer *egress.Dialer
}

// credentialsFor returns the credentials to send to a request for u made
// for the chart repository, registry or chart at base: only when base is a
// URL the HelmAuth's URLRegex matches, and u on the same host.
func (f *fetcher) credentialsFor(base, u string) (string, string, bool) {
	if f.auth == nil || f.auth.Username == "" || f.auth.URLRegex == nil || !f.auth.URLRegex.MatchString(base) {
		return "", "", false
	}
	b, err1 := url.Parse(base)
	t, err2 := url.Parse(u)
	if err1 != nil || err2 != nil || !strings.EqualFold(b.Host, t.Host) {
		return "", "", false
	}
	return f.auth.Username, f.auth.Password, true
}

// fetch downloads the chart that helm.repo, helm.chart and helm.version name.
func (f *fetcher) fetch(ctx context.Context, repoURL, chart, version string) (*fetchedChart, error) {
	switch {
	case strings.HasPrefix(chart, "oci://"):
		return f.fetchOCI(ctx, chart, version)
	case strings.HasPrefix(repoURL, "oci://"):
		if chart == "" {
			return f.fetchOCI(ctx, repoURL, version)
		}
		return f.fetchOCI(ctx, strings.TrimSuffix(repoURL, "/")+"/"+chart, version)
	case repoURL != "":
		if chart == "" {
			return nil, invalidf("helm.repo %s is set but helm.chart is empty: name the chart to fetch", repoURL)
		}
		return f.fetchFromRepo(ctx, repoURL, chart, version)
	default:
		data, err := f.httpGet(ctx, chart, chart)
		if err != nil {
			return nil, fmt.Errorf("downloading chart %s: %w", chart, err)
		}
		return unpack(chart, data)
	}
}

// fetchFromRepo resolves a version (exact, a semver range, or empty for the
// latest stable one) in a repository's index.yaml and downloads it.
func (f *fetcher) fetchFromRepo(ctx context.Context, repoURL, chart, version string) (*fetchedChart, error) {
	cv, err := f.resolveInRepo(ctx, repoURL, chart, version)
	if err != nil {
		return nil, err
	}
	if len(cv.URLs) == 0 {
		return nil, fmt.Errorf("chart %s %s in %s has no download URL", chart, cv.Version, repoURL)
	}
	chartURL, err := repo.ResolveReferenceURL(repoURL, cv.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("chart %s %s in %s: %w", chart, cv.Version, repoURL, err)
	}
	tgz, err := f.httpGet(ctx, repoURL, chartURL)
	if err != nil {
		return nil, fmt.Errorf("downloading chart %s %s: %w", chart, cv.Version, err)
	}
	if cv.Digest != "" {
		sum := sha256.Sum256(tgz)
		if got := hex.EncodeToString(sum[:]); !strings.EqualFold(got, cv.Digest) {
			return nil, fmt.Errorf("chart %s %s from %s: digest %s does not match the index (%s)", chart, cv.Version, chartURL, got, cv.Digest)
		}
	}
	ch, err := unpack(chartURL, tgz)
	if err != nil {
		return nil, err
	}
	ch.ref = strings.TrimSuffix(repoURL, "/") + "/" + chart
	return ch, nil
}

// resolveInRepo reads a repository's index.yaml and picks the entry of
// chart that version names (see pickVersion).
func (f *fetcher) resolveInRepo(ctx context.Context, repoURL, chart, version string) (*repo.ChartVersion, error) {
	indexURL, err := repo.ResolveReferenceURL(repoURL, "index.yaml")
	if err != nil {
		return nil, invalidf("helm.repo %q: %v", repoURL, err)
	}
	data, err := f.httpGet(ctx, repoURL, indexURL)
	if err != nil {
		return nil, fmt.Errorf("reading the index of chart repository %s: %w", repoURL, err)
	}
	index := &repo.IndexFile{}
	if err := yaml.Unmarshal(data, index); err != nil {
		return nil, fmt.Errorf("chart repository %s: invalid index.yaml: %w", repoURL, err)
	}
	if index.APIVersion == "" {
		return nil, fmt.Errorf("chart repository %s: index.yaml has no apiVersion; is this a Helm chart repository?", repoURL)
	}
	index.SortEntries()
	versions, ok := index.Entries[chart]
	if !ok || len(versions) == 0 {
		return nil, mark(invalidf("chart %q not found in %s (charts: %s)", chart, repoURL, listOrNone(chartNames(index))), ErrVersionNotFound)
	}
	cv, err := pickVersion(versions, version)
	if err != nil {
		return nil, mark(invalidf("chart %s: version %q is neither a version nor a semver range: %v", chart, version, err), ErrInvalidVersion)
	}
	if cv == nil {
		return nil, mark(invalidf("chart %s version %s not found in %s (available: %s)", chart, displayVersion(version), repoURL, listOrNone(versionList(versions))), ErrVersionNotFound)
	}
	return cv, nil
}

// pickVersion returns the version equal to want, or else the newest that the
// semver range want allows, or nil; an empty want is the newest stable
// version. It fails only when want is not a valid range.
func pickVersion(versions repo.ChartVersions, want string) (*repo.ChartVersion, error) {
	for _, cv := range versions {
		if want != "" && cv.Version == want {
			return cv, nil
		}
	}
	constraint, err := constraintFor(want)
	if err != nil {
		return nil, err
	}
	var best *repo.ChartVersion
	var bestV *semver.Version
	for _, cv := range versions {
		v, err := semver.NewVersion(cv.Version)
		if err != nil || !constraint.Check(v) {
			continue
		}
		if bestV == nil || v.GreaterThan(bestV) {
			best, bestV = cv, v
		}
	}
	return best, nil
}

func constraintFor(want string) (*semver.Constraints, error) {
	if want == "" {
		want = "*"
	}
	return semver.NewConstraint(want)
}

// fetchOCI pulls a chart from an OCI registry; a version that is a range, or
// none, is resolved against the registry's tags.
func (f *fetcher) fetchOCI(ctx context.Context, ref, version string) (*fetchedChart, error) {
	ref = strings.TrimSuffix(ref, "/")
	base := strings.TrimPrefix(ref, "oci://")
	client, err := f.ociClient(ctx, ref)
	if err != nil {
		return nil, err
	}
	tag, err := resolveOCITag(client, ref, version)
	if err != nil {
		return nil, err
	}
	// Registries do not allow "+" in tags; Helm pushes it as "_".
	res, err := client.Pull(base + ":" + strings.ReplaceAll(tag, "+", "_"))
	if err != nil {
		return nil, fmt.Errorf("pulling chart %s:%s: %w", ref, tag, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch, err := unpack(ref, res.Chart.Data)
	if err != nil {
		return nil, err
	}
	ch.ref = ref
	return ch, nil
}

// ociClient is a Helm registry client for ref with the fetcher's TLS
// settings, size limit and, where credentialsFor allows, credentials.
func (f *fetcher) ociClient(ctx context.Context, ref string) (*registry.Client, error) {
	tr, err := f.transport(ctx)
	if err != nil {
		return nil, err
	}
	opts := []registry.ClientOption{
		registry.ClientOptHTTPClient(&http.Client{Transport: limitedTransport{RoundTripper: tr, max: f.maxBytes}, Timeout: timeoutFrom(ctx)}),
		registry.ClientOptWriter(&bytes.Buffer{}),
	}
	if user, pass, ok := f.credentialsFor(ref, ref); ok {
		opts = append(opts, registry.ClientOptBasicAuth(user, pass))
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", ref, err)
	}
	return client, nil
}

// resolveOCITag returns version when it is an exact one, else the newest
// tag of ref (oci://...) that the range version (none: any) allows.
func resolveOCITag(client *registry.Client, ref, version string) (string, error) {
	if _, notExact := semver.StrictNewVersion(version); notExact == nil {
		return version, nil
	}
	base := strings.TrimPrefix(ref, "oci://")
	constraint, err := constraintFor(version)
	if err != nil {
		return "", mark(invalidf("chart %s: version %q is neither a version nor a semver range: %v", ref, version, err), ErrInvalidVersion)
	}
	tags, err := client.Tags(base)
	if err != nil {
		return "", fmt.Errorf("listing the versions of chart %s: %w", ref, err)
	}
	for _, t := range tags { // newest first
		if v, err := semver.NewVersion(t); err == nil && constraint.Check(v) {
			return t, nil
		}
	}
	return "", mark(invalidf("chart %s version %s not found in %s (available: %s)", path0(base), displayVersion(version), ref, listOrNone(tags)), ErrVersionNotFound)
}

func path0(ref string) string {
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		return ref[i+1:]
	}
	return ref
}

// unpack reads a packaged chart, checking that it is a valid one.
func unpack(source string, tgz []byte) (*fetchedChart, error) {
	files, err := loader.LoadArchiveFiles(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("chart from %s: %w", source, err)
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("chart from %s: %w", source, err)
	}
	return &fetchedChart{ref: source, name: ch.Name(), version: ch.Metadata.Version, files: files, archive: tgz}, nil
}

// httpGet downloads u, at most maxBytes of it. Credentials go only where
// credentialsFor allows. The connection is closed when ctx ends, so a
// cancelled read returns at once.
func (f *fetcher) httpGet(ctx context.Context, baseURL, u string) ([]byte, error) {
	tr, err := f.transport(ctx)
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, invalidf("invalid chart URL %q: %v", u, err)
	}
	req.Header.Set("User-Agent", "fleet")
	if user, pass, ok := f.credentialsFor(baseURL, u); ok {
		req.SetBasicAuth(user, pass)
	}
	// Go drops the Authorization header on a redirect to another host.
	resp, err := (&http.Client{Transport: tr, Timeout: timeoutFrom(ctx)}).Do(req)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, ctxErr
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("failed to fetch %s : %s", u, resp.Status)
	}
	data, err := readAtMost(resp.Body, f.maxBytes, u)
	if ctxErr := ctx.Err(); err != nil && ctxErr != nil {
		return nil, ctxErr
	}
	return data, err
}

// readAtMost reads body, failing once it is longer than limit.
func readAtMost(body io.Reader, limit int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(what, limit)
	}
	return data, nil
}

func tooLarge(what string, limit int64) error {
	return invalidf("%s is larger than %s, the most the manager downloads: use a smaller chart, or ask the operator to raise the limit",
		what, humanBytes(int(limit)))
}

// limitedTransport fails a response whose body is longer than max: the
// Helm registry client reads whole bodies into memory.
type limitedTransport struct {
	http.RoundTripper
	max int64
}

func (t limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.max {
		_ = resp.Body.Close() // refused unread: the size is the error to report
		return nil, tooLarge(req.URL.Redacted(), t.max)
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: t.max, what: req.URL.Redacted(), max: t.max}
	return resp, nil
}

type limitedBody struct {
	io.ReadCloser
	left, max int64
	what      string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, tooLarge(b.what, b.max)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, tooLarge(b.what, b.max)
	}
	return n, err
}

// transport makes an HTTP transport with the TLS settings of the HelmAuth
// whose connections are closed when ctx ends. It connects through the
// fetcher's dialer, so the outbound policy holds for every request and
// redirect.
func (f *fetcher) transport(ctx context.Context) (*http.Transport, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.auth != nil {
		if len(f.auth.CABundle) > 0 {
			pool, err := x509.SystemCertPool()
			if err != nil || pool == nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(f.auth.CABundle) {
				return nil, invalidf("the CA bundle for chart repositories holds no PEM certificate")
			}
			tlsConfig.RootCAs = pool
		}
		tlsConfig.InsecureSkipVerify = f.auth.InsecureSkipVerify // the user asked for it
	}
	dialer := f.dialer
	return &http.Transport{
		Proxy:               dialer.Proxy,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableKeepAlives:   true,
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
			return &ctxConn{Conn: conn, stop: stop}, nil
		},
	}, nil
}

// ctxConn stops watching the context once closed.
type ctxConn struct {
	net.Conn
	stop func() bool
}

func (c *ctxConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// timeoutFrom is the time left until ctx's deadline, or the default.
func timeoutFrom(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left > 0 {
			return left
		}
		return time.Millisecond
	}
	return defaultFetchTimeout
}

func chartNames(index *repo.IndexFile) []string {
	out := make([]string, 0, len(index.Entries))
	for name := range index.Entries {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func versionList(versions repo.ChartVersions) []string {
	out := make([]string, 0, len(versions))
	for _, cv := range versions {
		out = append(out, cv.Version)
	}
	return out
}

func listOrNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	const most = 20
	if len(items) > most {
		return strings.Join(items[:most], ", ") + fmt.Sprintf(", and %d more", len(items)-most)
	}
	return strings.Join(items, ", ")
}

func displayVersion(v string) string {
	if v == "" {
		return "(latest)"
	}
	return v
}
