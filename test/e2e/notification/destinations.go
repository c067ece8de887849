package notification

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"

	"github.com/gitfleet/fleet/internal/notify"
)

// told is one message a destination received: the revision it is about
// (chat messages carry its first 12 characters), what it said (the event,
// or the commit state), and its text.
type told struct {
	revision, key, text string
}

// destination is a loopback endpoint standing in for Slack, Teams or a git
// host's commit-status API: check reads one request the way the real
// service would (path, auth header, documented payload) and says what it
// told, or why it is refused.
type destination struct {
	*httptest.Server
	name  string
	check func(req *http.Request, body []byte) (told, error)

	mu       sync.Mutex
	received []told
	rejected []string
}

func newDestination(name string, check func(*http.Request, []byte) (told, error)) *destination {
	d := &destination{name: name, check: check}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err == nil && req.Method != http.MethodPost {
			err = fmt.Errorf("method %s", req.Method)
		}
		if err == nil && req.Header.Get("Content-Type") != "application/json" {
			err = fmt.Errorf("content type %q", req.Header.Get("Content-Type"))
		}
		var t told
		if err == nil {
			t, err = d.check(req, body)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if err != nil {
			d.rejected = append(d.rejected, err.Error()+": "+string(body))
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d.received = append(d.received, t)
		w.WriteHeader(http.StatusCreated)
	}))
	return d
}

// keys are what the destination was told about revision (a full commit;
// chat messages are matched on its first 12 characters), in order.
func (d *destination) keys(revision string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, t := range d.received {
		if t.revision == revision || t.revision == notify.ShortRevision(revision) {
			out = append(out, t.key)
		}
	}
	return out
}

// texts are the texts told about revision, in order.
func (d *destination) texts(revision string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, t := range d.received {
		if t.revision == revision || t.revision == notify.ShortRevision(revision) {
			out = append(out, t.text)
		}
	}
	return out
}

func (d *destination) refused() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.rejected)
}

// eventOf is the event a summary text starts with ("Started: commit ...").
func eventOf(text string) (string, error) {
	ev, _, ok := strings.Cut(text, ": commit ")
	if !ok || !slices.Contains([]string{"Started", "Succeeded", "Failed", "Stalled", "PartitionReached"}, strings.Split(ev, ",")[0]) {
		return "", fmt.Errorf("text %q does not start with an event and the commit", text)
	}
	return ev, nil
}

// slackPath is the secret part of the Slack incoming webhook's URL.
const slackPath = "/services/T000/B000/XXXXSECRET"

// slackDestination checks Slack's incoming-webhook payload: text, and one
// attachment colored by outcome with the revision among its fields.
func slackDestination() *destination {
	return newDestination("slack", func(req *http.Request, body []byte) (told, error) {
		if req.URL.Path != slackPath {
			return told{}, fmt.Errorf("path %q", req.URL.Path)
		}
		var m notify.SlackMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return told{}, err
		}
		ev, err := eventOf(m.Text)
		if err != nil {
			return told{}, err
		}
		if len(m.Attachments) != 1 {
			return told{}, fmt.Errorf("%d attachments", len(m.Attachments))
		}
		a := m.Attachments[0]
		want := map[string]string{"Succeeded": "good", "Failed": "danger"}[ev]
		if want == "" {
			want = "#439FE0"
		}
		if a.Color != want || a.Fallback != m.Text {
			return told{}, fmt.Errorf("attachment color %q (want %q), fallback %q", a.Color, want, a.Fallback)
		}
		rev := ""
		for _, f := range a.Fields {
			if f.Title == "Revision" {
				rev = f.Value
			}
		}
		if rev == "" {
			return told{}, fmt.Errorf("no Revision field")
		}
		return told{revision: rev, key: ev, text: m.Text}, nil
	})
}

// teamsDestination checks the Teams Workflows payload: a message with one
// Adaptive Card whose first block names the source and event.
func teamsDestination() *destination {
	return newDestination("msteams", func(req *http.Request, body []byte) (told, error) {
		var m struct {
			Type        string `json:"type"`
			Attachments []struct {
				ContentType string  `json:"contentType"`
				ContentURL  *string `json:"contentUrl"`
				Content     struct {
					Type    string           `json:"type"`
					Version string           `json:"version"`
					Body    []map[string]any `json:"body"`
				} `json:"content"`
			} `json:"attachments"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			return told{}, err
		}
		if m.Type != "message" || len(m.Attachments) != 1 {
			return told{}, fmt.Errorf("type %q with %d attachments", m.Type, len(m.Attachments))
		}
		a := m.Attachments[0]
		if a.ContentType != notify.AdaptiveCardContentType || a.ContentURL != nil || a.Content.Type != "AdaptiveCard" || a.Content.Version != "1.4" || len(a.Content.Body) < 3 {
			return told{}, fmt.Errorf("not an Adaptive Card 1.4 attachment")
		}
		text, _ := a.Content.Body[1]["text"].(string)
		ev, err := eventOf(text)
		if err != nil {
			return told{}, err
		}
		title, _ := a.Content.Body[0]["text"].(string)
		if !strings.HasSuffix(title, ": "+ev) {
			return told{}, fmt.Errorf("title %q for event %s", title, ev)
		}
		rev := ""
		facts, _ := a.Content.Body[2]["facts"].([]any)
		for _, f := range facts {
			if fm, ok := f.(map[string]any); ok && fm["title"] == "Revision" {
				rev, _ = fm["value"].(string)
			}
		}
		if rev == "" {
			return told{}, fmt.Errorf("no Revision fact")
		}
		return told{revision: rev, key: ev, text: text}, nil
	})
}

// commitStatusDestination checks a git host's commit-status request: the
// path, the headers (auth first), and a body whose state is one of states
// and whose context (name) is context.
func commitStatusDestination(name, prefix string, headers map[string]string, contextKey, context string, states []string) *destination {
	return newDestination(name, func(req *http.Request, body []byte) (told, error) {
		for k, v := range headers {
			if got := req.Header.Get(k); got != v {
				return told{}, fmt.Errorf("header %s %q", k, got)
			}
		}
		path := req.URL.EscapedPath()
		sha, ok := strings.CutPrefix(path, prefix)
		if !ok || len(sha) != 40 {
			return told{}, fmt.Errorf("path %q, want %s<sha>", path, prefix)
		}
		var m map[string]string
		if err := json.Unmarshal(body, &m); err != nil {
			return told{}, err
		}
		if !slices.Contains(states, m["state"]) {
			return told{}, fmt.Errorf("state %q", m["state"])
		}
		if m[contextKey] != context {
			return told{}, fmt.Errorf("%s %q, want %q", contextKey, m[contextKey], context)
		}
		if m["description"] == "" || !strings.HasSuffix(m["target_url"], "/commit/"+sha) && !strings.HasSuffix(m["target_url"], "/-/commit/"+sha) {
			return told{}, fmt.Errorf("description %q, target_url %q", m["description"], m["target_url"])
		}
		return told{revision: sha, key: m["state"], text: m["description"]}, nil
	})
}
