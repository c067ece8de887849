package notification

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/gitfleet/fleet/internal/notify"
)

// receiver is a loopback webhook endpoint: it keeps every message whose
// signature checks out with key and counts those that do not.
type receiver struct {
	*httptest.Server
	key []byte

	mu       sync.Mutex
	messages []notify.Message
	// rejected says why each refused request was refused.
	rejected []string
}

func newReceiver(key []byte) *receiver {
	r := &receiver{key: key}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		r.reject(w, "reading the body: "+err.Error())
		return
	}
	if why := r.check(req, body); why != "" {
		r.reject(w, why)
		return
	}
	var m notify.Message
	if err := json.Unmarshal(body, &m); err != nil {
		r.reject(w, "decoding the body: "+err.Error())
		return
	}
	if got := req.Header.Get("X-Fleet-Event"); got != m.Event {
		r.reject(w, fmt.Sprintf("X-Fleet-Event %q, body event %q", got, m.Event))
		return
	}
	if got := req.Header.Get("X-Fleet-Delivery"); got != m.ID {
		r.reject(w, fmt.Sprintf("X-Fleet-Delivery %q, body id %q", got, m.ID))
		return
	}
	r.mu.Lock()
	r.messages = append(r.messages, m)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// check returns why the request's signature or content type is wrong, or "".
func (r *receiver) check(req *http.Request, body []byte) string {
	if req.Method != http.MethodPost {
		return "method " + req.Method
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/json" {
		return "content type " + ct
	}
	mac := hmac.New(sha256.New, r.key)
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	got := req.Header.Get("X-Fleet-Signature-256")
	if !hmac.Equal([]byte(got), []byte(want)) {
		return fmt.Sprintf("signature %q does not match the body", got)
	}
	return ""
}

func (r *receiver) reject(w http.ResponseWriter, why string) {
	r.mu.Lock()
	r.rejected = append(r.rejected, why)
	r.mu.Unlock()
	http.Error(w, why, http.StatusBadRequest)
}

// received returns a copy of the accepted messages, in arrival order.
func (r *receiver) received() []notify.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]notify.Message(nil), r.messages...)
}

// refused returns why requests were refused.
func (r *receiver) refused() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.rejected...)
}

// events lists the events of the messages about one revision, in order.
func (r *receiver) events(revision string) []string {
	var out []string
	for _, m := range r.received() {
		if m.Revision == revision {
			out = append(out, m.Event)
		}
	}
	return out
}
