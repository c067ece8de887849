package notification_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/controllers/notification"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/enqueue"
	"github.com/gitfleet/fleet/internal/notify"
	"github.com/gitfleet/fleet/test/envtest"
)

var env *envtest.Environment

// The suite's own manager runs nothing: each test starts (and restarts)
// managers of its own, to show what a restart sends.
func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:        m,
		Name:     "notification",
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

const timeout = 30 * time.Second

// startManager runs a new manager with only the Notification reconciler on
// the suite's API server, as a restarted fleet-manager would; stop ends it.
func startManager(t *testing.T) (stop func()) {
	t.Helper()
	cc := enqueue.ControllerDefaults()
	cc.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: controllers.Scheme(), Controller: cc, Cache: controllers.CacheOptions(controllers.Options{}),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		t.Fatalf("creating a manager: %v", err)
	}
	r := &notification.Reconciler{Client: mgr.GetClient(), Egress: egress.AllowLoopback(), Workers: 2,
		Sender: notify.NewClient(egress.NewDialer(egress.AllowLoopback()))}
	r.Sender.Backoff = 50 * time.Millisecond
	if err := r.SetupWithManager(context.Background(), mgr); err != nil {
		t.Fatalf("setting up the reconciler: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("the manager ended with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// received is one request a receiver got.
type received struct {
	Path    string
	Headers http.Header
	Body    []byte
}

// receiver is a loopback HTTP server that keeps what it is sent.
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []received
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rv := &receiver{}
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		rv.mu.Lock()
		rv.got = append(rv.got, received{Path: req.URL.Path, Headers: req.Header.Clone(), Body: body})
		rv.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(rv.Close)
	return rv
}

func (rv *receiver) all() []received {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]received(nil), rv.got...)
}

// messages decodes the generic webhook's messages, checking each one's
// signature under key.
func (rv *receiver) messages(g Gomega, key []byte) []notify.Message {
	all := rv.all()
	out := make([]notify.Message, 0, len(all))
	for _, r := range all {
		g.Expect(hmac.Equal([]byte(r.Headers.Get(notify.SignatureHeader)), []byte(notify.Sign(key, r.Body)))).To(BeTrue(), "signature of %s", r.Body)
		var m notify.Message
		g.Expect(json.Unmarshal(r.Body, &m)).To(Succeed())
		g.Expect(r.Headers.Get(notify.EventHeader)).To(Equal(m.Event))
		g.Expect(r.Headers.Get(notify.DeliveryHeader)).To(Equal(m.ID))
		out = append(out, m)
	}
	return out
}

func events(ms []notify.Message) string {
	s := make([]string, 0, len(ms))
	for _, m := range ms {
		s = append(s, m.Event+"@"+notify.ShortRevision(m.Revision))
	}
	return strings.Join(s, ",")
}
