package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Target is one destination with its credentials, as the Notification and
// its Secret give them.
type Target struct {
	// Type is the kind of destination (notification.DestinationType).
	Type notification.DestinationType
	// Address is the webhook URL, or the git host API's base URL ("" for
	// the host's public default).
	Address string
	// Token authenticates to a git host (and, for Bitbucket, an access
	// token); Username and Password are a Bitbucket app password.
	Token, Username, Password string
	// HMACKey signs the generic webhook's body.
	HMACKey []byte
	// Context names the commit status.
	Context string
	// RepoURL is the GitRepo's repository, whose commit gets the status.
	RepoURL string
}

// ErrNotApplicable is returned for a message a destination has nothing to
// do with: a commit status for a HelmOp, or for an event that changes no
// commit status. Nothing was sent; there is nothing to retry.
var ErrNotApplicable = errors.New("nothing to send to this destination for this message")

// Client sends messages over HTTP.
type Client struct {
	// HTTP makes the requests; its transport must dial through the
	// manager's egress.Dialer.
	HTTP *http.Client
	// Attempts is how many times one message is tried (default 3).
	Attempts int
	// Backoff is the wait before the second attempt, doubled before each
	// further one (default 1s).
	Backoff time.Duration
}

// requestTimeout bounds one request, answer included.
const requestTimeout = 15 * time.Second

// NewClient returns a Client whose every connection goes through d.
func NewClient(d *egress.Dialer) *Client {
	return &Client{HTTP: &http.Client{Transport: d.Transport(), Timeout: requestTimeout}}
}

// request is one HTTP request to make.
type request struct {
	url     string
	body    []byte
	headers map[string]string
}

// Send delivers m to t, retrying what may pass. A failure that cannot pass
// by retrying (an answer 4xx but 408 and 429, a malformed address, an
// address the egress policy refuses) is Stalling, with the reason
// Rejected, InvalidSpec or DestinationRefused; others are plain errors.
func (c *Client) Send(ctx context.Context, t Target, m *Message) error {
	req, err := build(t, m)
	if err != nil {
		return err
	}
	attempts, wait := c.Attempts, c.Backoff
	if attempts <= 0 {
		attempts = 3
	}
	if wait <= 0 {
		wait = time.Second
	}
	for i := 1; ; i++ {
		err = c.do(ctx, req)
		if err == nil || outcome.IsStalling(err) || i >= attempts {
			return egress.ForTenant(ctx, err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// maxAnswer bounds what is read of an answer, for the error message.
const maxAnswer = 512

func (c *Client) do(ctx context.Context, r request) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(r.body))
	if err != nil {
		return outcome.Stall(notification.ReasonInvalidSpec, fmt.Errorf("the destination address is no URL: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "fleet-manager")
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if outcome.IsStalling(err) {
			return err
		}
		return fmt.Errorf("posting to %s: %w", redact(r.url), unwrapURLError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return nil
	case alreadyThere(code, answer):
		return nil
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
		return fmt.Errorf("%s answered %s: %s", redact(r.url), resp.Status, oneLine(answer))
	default:
		return outcome.Stallf(notification.ReasonRejected, "%s answered %s: %s: check the destination's address and the token in its Secret",
			redact(r.url), resp.Status, oneLine(answer))
	}
}

// alreadyThere is GitLab's answer to a status its commit already has
// ("Cannot transition status via :run from :running"): nothing is lost.
func alreadyThere(code int, answer []byte) bool {
	return code == http.StatusBadRequest && bytes.Contains(answer, []byte("Cannot transition status"))
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redact is a URL without its path and query, which for incoming webhooks
// hold the credential.
func redact(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return "the destination"
	}
	host, _, _ := strings.Cut(rest, "/")
	if _, h, ok := strings.Cut(host, "@"); ok {
		host = h
	}
	return scheme + "://" + host
}

func oneLine(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if s == "" {
		return "(no body)"
	}
	return Truncate(s, 200)
}
