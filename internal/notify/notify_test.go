package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/outcome"
)

const sha = "0123456789abcdef0123456789abcdef01234567"

func testMessage(event string) *Message {
	m := &Message{Version: SchemaVersion, ID: "id-1", Event: event, Namespace: "team-a", Kind: "GitRepo", Name: "app", Revision: sha,
		Repo: "https://github.com/example/app.git", CommitURL: "https://github.com/example/app/commit/" + sha,
		Clusters: Clusters{Desired: 500, Ready: 412}, Deployments: Counts{Desired: 500, Ready: 412, ErrApplied: 3, WaitApplied: 85},
		Errors: []Failure{{Bundle: "app-web", Cluster: "fleet-default/edge-1", State: "ErrApplied", Message: "chart not found"}}}
	m.Text = Summary(m)
	return m
}

type hit struct {
	method, path string
	header       http.Header
	body         []byte
}

// server answers each request with the next of codes (the last one
// repeated) and keeps what it got.
func server(t *testing.T, codes ...int) (*httptest.Server, func() []hit) {
	t.Helper()
	var mu sync.Mutex
	var hits []hit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		hits = append(hits, hit{r.Method, r.URL.EscapedPath(), r.Header.Clone(), b})
		code := codes[min(len(hits), len(codes))-1]
		mu.Unlock()
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"message":"answer"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []hit {
		mu.Lock()
		defer mu.Unlock()
		return append([]hit(nil), hits...)
	}
}

func client() *Client {
	c := NewClient(egress.NewDialer(egress.AllowLoopback()))
	c.Backoff = 10 * time.Millisecond
	return c
}

func decode(g Gomega, b []byte) map[string]any {
	var m map[string]any
	g.Expect(json.Unmarshal(b, &m)).To(Succeed())
	return m
}

func TestWebhookIsSignedWithHMACSHA256(t *testing.T) {
	g := NewWithT(t)
	srv, hits := server(t, http.StatusOK)
	m := testMessage("Failed")
	g.Expect(client().Send(context.Background(), Target{Type: notification.DestinationWebhook, Address: srv.URL + "/in", HMACKey: []byte("k")}, m)).To(Succeed())
	h := hits()
	g.Expect(h).To(HaveLen(1))
	g.Expect(h[0].method).To(Equal(http.MethodPost))
	g.Expect(h[0].header.Get(SignatureHeader)).To(Equal(Sign([]byte("k"), h[0].body)))
	g.Expect(h[0].header.Get(SignatureHeader)).To(HavePrefix("sha256="))
	g.Expect(h[0].header.Get(EventHeader)).To(Equal("Failed"))
	g.Expect(h[0].header.Get(DeliveryHeader)).To(Equal("id-1"))
	var got Message
	g.Expect(json.Unmarshal(h[0].body, &got)).To(Succeed())
	g.Expect(got.Errors[0].Cluster).To(Equal("fleet-default/edge-1"))
	g.Expect(got.Text).To(Equal("Failed: commit 0123456789ab of GitRepo team-a/app: 412/500 clusters ready, 3 failed: fleet-default/edge-1: chart not found"))
	body := decode(g, h[0].body)
	g.Expect(body).To(HaveKey("version"))
	g.Expect(body).To(HaveKey("deployments"))
}

func TestSlackAndTeamsPayloads(t *testing.T) {
	g := NewWithT(t)
	srv, hits := server(t, http.StatusOK)
	c := client()
	g.Expect(c.Send(context.Background(), Target{Type: notification.DestinationSlack, Address: srv.URL + "/services/T/B/X"}, testMessage("Succeeded"))).To(Succeed())
	g.Expect(c.Send(context.Background(), Target{Type: notification.DestinationMSTeams, Address: srv.URL + "/workflows/x"}, testMessage("Failed"))).To(Succeed())
	h := hits()
	slack := decode(g, h[0].body)
	g.Expect(slack["text"]).To(HavePrefix("Succeeded: commit 0123456789ab"))
	g.Expect(slack["attachments"].([]any)[0].(map[string]any)["color"]).To(Equal("good"))
	teams := decode(g, h[1].body)
	g.Expect(teams["type"]).To(Equal("message"))
	att := teams["attachments"].([]any)[0].(map[string]any)
	g.Expect(att["contentType"]).To(Equal("application/vnd.microsoft.card.adaptive"))
	g.Expect(att).To(HaveKeyWithValue("contentUrl", BeNil()))
	card := att["content"].(map[string]any)
	g.Expect(card["type"]).To(Equal("AdaptiveCard"))
	g.Expect(card["$schema"]).To(Equal("http://adaptivecards.io/schemas/adaptive-card.json"))
	g.Expect(card["body"].([]any)[0].(map[string]any)["color"]).To(Equal("Attention"))
}

func TestCommitStatusPayloads(t *testing.T) {
	srv, hits := server(t, http.StatusCreated)
	tests := []struct {
		target Target
		event  string
		path   string
		auth   [2]string
		want   map[string]any
	}{
		{target: Target{Type: notification.DestinationGitHub, Token: "t1", RepoURL: "git@github.com:example/app.git"}, event: "Started",
			path: "/repos/example/app/statuses/" + sha, auth: [2]string{"Authorization", "Bearer t1"},
			want: map[string]any{"state": "pending", "context": "fleet/app", "target_url": "https://github.com/example/app/commit/" + sha}},
		{target: Target{Type: notification.DestinationGitLab, Token: "t2", RepoURL: "https://gitlab.com/group/sub/app.git", Context: "prod"}, event: "Succeeded",
			path: "/api/v4/projects/group%2Fsub%2Fapp/statuses/" + sha, auth: [2]string{"PRIVATE-TOKEN", "t2"},
			want: map[string]any{"state": "success", "name": "prod"}},
		{target: Target{Type: notification.DestinationBitbucket, Username: "u", Password: "p", RepoURL: "https://bitbucket.org/ws/app"}, event: "Failed",
			path: "/2.0/repositories/ws/app/commit/" + sha + "/statuses/build", auth: [2]string{"Authorization", "Basic dTpw"},
			want: map[string]any{"state": "FAILED", "key": "fleet/app"}},
		{target: Target{Type: notification.DestinationGitea, Token: "t4", RepoURL: "https://gitea.example.com/org/app.git"}, event: "Stalled",
			path: "/api/v1/repos/org/app/statuses/" + sha, auth: [2]string{"Authorization", "token t4"},
			want: map[string]any{"state": "failure", "context": "fleet/app"}},
	}
	for i, tt := range tests {
		t.Run(string(tt.target.Type), func(t *testing.T) {
			g := NewWithT(t)
			tt.target.Address = srv.URL
			g.Expect(client().Send(context.Background(), tt.target, testMessage(tt.event))).To(Succeed())
			h := hits()[i]
			g.Expect(h.path).To(Equal(tt.path))
			g.Expect(h.header.Get(tt.auth[0])).To(Equal(tt.auth[1]))
			body := decode(g, h.body)
			for k, v := range tt.want {
				g.Expect(body).To(HaveKeyWithValue(k, v))
			}
			g.Expect(len(body["description"].(string))).To(BeNumerically("<=", maxDescription))
		})
	}
}

func TestCommitStatusNotApplicable(t *testing.T) {
	g := NewWithT(t)
	m := testMessage("PartitionReached")
	g.Expect(client().Send(context.Background(), Target{Type: notification.DestinationGitHub, RepoURL: "https://github.com/a/b"}, m)).To(MatchError(ErrNotApplicable))
	m = testMessage("Started")
	m.Kind = "HelmOp"
	g.Expect(client().Send(context.Background(), Target{Type: notification.DestinationGitHub, RepoURL: "https://github.com/a/b"}, m)).To(MatchError(ErrNotApplicable))
}

func TestRetries(t *testing.T) {
	g := NewWithT(t)
	srv, hits := server(t, http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusOK)
	g.Expect(client().Send(context.Background(), Target{Type: notification.DestinationSlack, Address: srv.URL}, testMessage("Started"))).To(Succeed())
	g.Expect(hits()).To(HaveLen(3))

	srv, hits = server(t, http.StatusUnauthorized)
	err := client().Send(context.Background(), Target{Type: notification.DestinationSlack, Address: srv.URL + "/services/SECRET"}, testMessage("Started"))
	g.Expect(outcome.IsStalling(err)).To(BeTrue())
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(notification.ReasonRejected))
	g.Expect(err.Error()).NotTo(ContainSubstring("SECRET"))
	g.Expect(hits()).To(HaveLen(1), "a 401 is not retried")

	srv, hits = server(t, http.StatusBadGateway)
	err = client().Send(context.Background(), Target{Type: notification.DestinationSlack, Address: srv.URL}, testMessage("Started"))
	g.Expect(err).To(HaveOccurred())
	g.Expect(outcome.IsStalling(err)).To(BeFalse())
	g.Expect(hits()).To(HaveLen(3))
}

func TestTheEgressPolicyApplies(t *testing.T) {
	g := NewWithT(t)
	srv, hits := server(t, http.StatusOK)
	c := NewClient(egress.NewDialer(egress.Policy{}))
	err := c.Send(context.Background(), Target{Type: notification.DestinationWebhook, Address: srv.URL}, testMessage("Started"))
	g.Expect(errors.Is(err, egress.ErrRefused) || outcome.ReasonOf(err, "") == "DestinationRefused").To(BeTrue(), "%v", err)
	g.Expect(hits()).To(BeEmpty())
}

func TestRepoPath(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]string{
		"https://github.com/o/r.git": "github.com o/r", "git@github.com:o/r.git": "github.com o/r",
		"ssh://git@gitlab.example.com:2222/g/s/r": "gitlab.example.com g/s/r", "https://host/r": "",
	} {
		h, p, ok := RepoPath(in)
		if want == "" {
			g.Expect(ok).To(BeFalse(), in)
			continue
		}
		g.Expect(h+" "+p).To(Equal(want), in)
	}
}
