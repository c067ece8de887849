package localcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultReadyTimeout bounds how long a caller waits for the
// manager to be ready: a start, one cache sync, on a busy machine.
const DefaultReadyTimeout = 2 * time.Minute

// FreeAddr returns a loopback address with a port nobody listens on at the
// moment of the call.
func FreeAddr() (string, error) {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// WaitReady waits until GET url answers 200, for at most timeout. It gives up
// early when the process exits. The error names what it waited for and holds
// the last answer and the tail of the process's log.
func (p *Process) WaitReady(ctx context.Context, url string, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	last := "no answer yet"
	exited := false
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			exited = true
			return false, fmt.Errorf("%s exited", p.Name)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // kept in last for the timeout's error: the process may not listen yet, poll again.
		}
		_ = resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err == nil {
		return nil
	}
	what := fmt.Sprintf("%s to answer 200 on %s within %s", p.Name, url, timeout)
	if exited {
		what = fmt.Sprintf("%s to answer 200 on %s, but it exited", p.Name, url)
	}
	return fmt.Errorf("waited for %s (last answer: %s): %w\nlog %s ends with:\n%s", what, last, err, p.Log, p.Tail(4000))
}
