package join

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The API server's priority and fairness refuses requests it has no room
// for with 429 and a Retry-After that grows with the refusals, up to 32
// seconds. client-go waits exactly that long and tries again, inside the
// same call: every agent refused in the same second (all agents with one
// registration token are one flow, so thousands at once after an install
// or a manager's outage) comes back in the same second, is refused again
// but for the few the queues hold, and the wait grows to its cap. A
// registration of 10,000 at once took 35 minutes that way.
//
// The registration's client hands a 429 back to the caller instead, with
// the server's advice in the error (apierrors.SuggestsClientDelay), and the
// caller waits it spread out (retryWait): at least what the server asked,
// at most twice that, so the refused come back over as many seconds as the
// server asked them to wait rather than in one.

// withPacing makes cfg's client return a 429 carrying Retry-After at once,
// as an error whose details keep the server's advice, instead of retrying
// it itself after exactly that long.
func withPacing(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	wrap := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		return pacing{next: rt}
	}
	return cfg
}

// pacing rewrites a 429 response with Retry-After into a Status whose
// details hold it, without the header client-go retries by.
type pacing struct{ next http.RoundTripper }

// WrappedRoundTripper lets client-go reach the transport underneath (to
// cancel a request that timed out).
func (p pacing) WrappedRoundTripper() http.RoundTripper { return p.next }

func (p pacing) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		return resp, err
	}
	seconds, ok := retryAfter(resp.Header)
	if !ok {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	status := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests,
		Message: fmt.Sprintf("the manager's API server is busy (429 Too Many Requests): it asks to retry after %ds", seconds),
		Details: &metav1.StatusDetails{RetryAfterSeconds: int32(seconds)},
	}
	body, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	resp.Header = resp.Header.Clone()
	resp.Header.Del("Retry-After")
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.ContentLength = int64(len(body))
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// retryAfter reads a Retry-After of whole seconds, at most an hour.
func retryAfter(h http.Header) (int, bool) {
	seconds, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || seconds < 1 {
		return 0, false
	}
	return min(seconds, 3600), true
}

// retryWait is the wait before trying again after err: what the server
// asked (a 429's Retry-After) spread over once to twice that, else
// fallback.
func retryWait(err error, fallback time.Duration) time.Duration {
	seconds, ok := apierrors.SuggestsClientDelay(err)
	if !ok || seconds < 1 {
		return fallback
	}
	asked := time.Duration(seconds) * time.Second
	return asked + time.Duration(mrand.Int64N(int64(asked))) //nolint:gosec // G404: jitter only spreads load, it guards nothing
}
