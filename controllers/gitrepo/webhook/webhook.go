package webhook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// SecretKey is the key, in the Secret named by a GitRepo's
// spec.webhookSecret, of the shared secret its webhook calls carry.
const SecretKey = "token"

// DefaultMaxBytes is the largest payload accepted. Push events are a
// few KiB; GitHub caps them at 25 MiB, but a push that large lists thousands
// of commits, and a poll of the repository needs none of them.
const DefaultMaxBytes = 1 << 20

// Default per-source rate of webhook calls: a steady rate per second and a
// burst, per remote IP address.
const (
	DefaultRate  = 5
	DefaultBurst = 20
)

// Options configure the webhook handler.
type Options struct {
	// SecretReader reads the Secrets named by spec.webhookSecret; default the
	// handler's client. Pass mgr.GetAPIReader() so no Secret is cached.
	SecretReader client.Reader
	// Secret, when set, is the shared secret required of calls for GitRepos
	// that name no webhookSecret; when empty, such calls need none.
	Secret []byte
	// MaxBodyBytes bounds the payload; default DefaultMaxBytes.
	MaxBodyBytes int64
	// Timeout bounds the handling of one call; default 10s.
	Timeout time.Duration
	// Rate and Burst limit the calls of one remote IP address (a token
	// bucket each); more are answered 429. Default DefaultRate and
	// DefaultBurst.
	Rate  rate.Limit
	Burst int
}

// NewHandler returns the handler for the push webhooks of GitHub,
// GitLab, Bitbucket Cloud, Bitbucket Server, Gogs and Azure DevOps.
// A push to a repository and branch that GitRepos follow sets their
// status.webhookCommit to the pushed commit; the GitRepo controller sees the
// change and polls the repository at once, whatever its pollingInterval
// (also with disablePolling). Writing the status, rather than signalling the
// controller in memory, works whichever manager replica receives the call.
//
// Each host's call is checked with its own scheme (see verify) against the
// GitRepo's webhookSecret Secret (its per-host key, else its shared token)
// or, for a GitRepo without one, the manager-wide secret; a call that fails
// verification for every GitRepo it concerns is answered 401. Only without
// either secret are unverified calls accepted. A call that triggers nothing
// and is not signed with the manager-wide secret gets one answer, 401 with
// a reason taken from the call alone, whether or not a GitRepo follows the
// repository: whoever holds no secret cannot tell which ones are followed.
//
// The handler is exposed to anyone who can reach the port: bodies are
// bounded (413), the commit must be a full hex object name (400), each
// remote address has its own rate (429), and replies name no GitRepo.
func NewHandler(c client.Client, o Options) http.Handler {
	if o.SecretReader == nil {
		o.SecretReader = c
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	unheld := make([]byte, 32)
	if _, err := rand.Read(unheld); err != nil {
		panic(fmt.Sprintf("reading random bytes for the webhook: %v", err))
	}
	return &webhook{c: c, o: o, limits: newSourceLimits(o.Rate, o.Burst), unheld: unheld}
}

type webhook struct {
	c      client.Client
	o      Options
	limits *sourceLimits
	// unheld is a random key nobody holds: checking a call against it
	// tells what is wrong with the call itself.
	unheld []byte
}

// push is what a push event says, whoever sent it.
type push struct {
	provider      string // one of the Host constants
	ref           string
	commit        string
	defaultBranch string
	urls          []string
}

// Response is the JSON body of the webhook's answers. It names no
// GitRepo: whoever can reach the port learns nothing of the namespaces and
// names of the manager's GitRepos; the manager's log does.
type Response struct {
	// Message says what happened.
	Message string `json:"message"`
	// Commit is the pushed commit.
	Commit string `json:"commit,omitempty"`
	// Triggered counts the GitRepos that will sync now.
	Triggered int `json:"triggered"`
	// Rejected says why the call did not match a GitRepo's secret, once per
	// distinct reason.
	Rejected []string `json:"rejected,omitempty"`
	// Failed says why a GitRepo could not be triggered, once per distinct
	// reason.
	Failed []string `json:"failed,omitempty"`
}

func (h *webhook) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !h.limits.allow(req.RemoteAddr) {
		w.Header().Set("Retry-After", "1")
		reply(w, http.StatusTooManyRequests, Response{Message: "too many webhook calls from this address; retry later"})
		return
	}
	if req.Method != http.MethodPost {
		reply(w, http.StatusMethodNotAllowed, Response{Message: "only POST is accepted"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, h.o.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		reply(w, http.StatusRequestEntityTooLarge, Response{Message: fmt.Sprintf("reading the payload: larger than %d bytes", h.o.MaxBodyBytes)})
		return
	case err != nil:
		reply(w, http.StatusBadRequest, Response{Message: fmt.Sprintf("reading the payload: %v", err)})
		return
	}
	p, ignored, err := parsePush(req.Header, body)
	switch {
	case err != nil:
		reply(w, http.StatusBadRequest, Response{Message: err.Error()})
		return
	case ignored != "":
		reply(w, http.StatusOK, Response{Message: ignored})
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), h.o.Timeout)
	defer cancel()
	log := ctrl.LoggerFrom(ctx).WithName("gitrepo-webhook")

	repos := &fleet.GitRepoList{}
	if err := h.c.List(ctx, repos); err != nil {
		reply(w, http.StatusInternalServerError, Response{Message: fmt.Sprintf("listing GitRepos: %v", err)})
		return
	}
	resp := Response{Commit: p.commit}
	matched := 0
	for i := range repos.Items {
		repo := &repos.Items[i]
		if !urlMatches(repo.Spec.Repo, p.urls) || !refMatches(repo, p.ref, p.defaultBranch) {
			continue
		}
		matched++
		secret, err := h.secret(ctx, repo)
		if err != nil {
			log.Error(err, "Webhook call not verified: the GitRepo's webhook secret cannot be read", "gitRepo", klog.KObj(repo))
			resp.Failed = addOnce(resp.Failed, "the webhook secret of a GitRepo cannot be read; the manager's log names it")
			continue
		}
		if why := verify(p.provider, req.Header, body, secret); why != "" {
			log.V(1).Info("Webhook call rejected", "gitRepo", klog.KObj(repo), "reason", why)
			resp.Rejected = addOnce(resp.Rejected, why)
			continue
		}
		if err := h.trigger(ctx, repo, p.commit); err != nil {
			log.Error(err, "Webhook could not trigger a sync", "gitRepo", klog.KObj(repo))
			resp.Failed = addOnce(resp.Failed, "a GitRepo could not be triggered; the manager's log names it")
			continue
		}
		log.Info("Webhook triggered a sync", "gitRepo", klog.KObj(repo), "commit", p.commit, "provider", p.provider)
		resp.Triggered++
	}
	if matched == 0 {
		log.V(1).Info("Webhook call for a repository and branch no GitRepo follows", "ref", p.ref, "repository", firstOr(p.urls, ""))
	}
	if resp.Triggered == 0 && !h.holdsManagerSecret(p, req.Header, body) {
		// Nothing shows the caller has a secret: whether a GitRepo follows
		// the repository stays untold.
		reply(w, http.StatusUnauthorized, h.unverified(p, req.Header, body))
		return
	}
	code := http.StatusOK
	switch {
	case len(resp.Failed) > 0:
		code, resp.Message = http.StatusInternalServerError, "some GitRepos could not be triggered; redeliver the call"
	case matched == 0:
		resp.Message = fmt.Sprintf("no GitRepo follows %s of %s", p.ref, firstOr(p.urls, "this repository"))
	case resp.Triggered == 0:
		code, resp.Message = http.StatusUnauthorized, unverifiedMessage
	default:
		resp.Message = fmt.Sprintf("triggered %d GitRepo(s)", resp.Triggered)
	}
	reply(w, code, resp)
}

// unverifiedMessage answers a call that triggered nothing and proved no
// secret, whether or not a GitRepo follows what it names.
const unverifiedMessage = "signature verification failed: the call does not carry the webhook secret of a GitRepo that follows this repository and branch, " +
	"if one does; the manager's log says which"

// holdsManagerSecret tells whether the call is signed with the manager-wide
// secret: its sender may learn that no GitRepo follows what it pushed, or
// why the GitRepos that do refused it.
func (h *webhook) holdsManagerSecret(p push, hdr http.Header, body []byte) bool {
	return len(h.o.Secret) > 0 && verify(p.provider, hdr, body, webhookSecret{shared: h.o.Secret}) == ""
}

// unverified is the answer to a call that triggered nothing and proved no
// secret. It is made from the call alone, the same whether no GitRepo
// follows the repository or some refused the call: the reason is the
// call's against a key nobody holds (a missing header, or a signature that
// does not match), never a GitRepo's own (a webhookSecret without this
// host's key, or one that cannot be read), which the log keeps.
func (h *webhook) unverified(p push, hdr http.Header, body []byte) Response {
	why := verify(p.provider, hdr, body, webhookSecret{shared: h.unheld})
	if why == "" {
		why = "the call does not match the webhook secret"
	}
	return Response{Message: unverifiedMessage, Commit: p.commit, Rejected: []string{why}}
}

// secret is what a call for repo must carry: the manager-wide secret for a
// GitRepo without webhookSecret, else the Secret's shared key (token) and
// its per-host keys, which override it for their host. A Secret with
// neither is an error.
func (h *webhook) secret(ctx context.Context, repo *fleet.GitRepo) (webhookSecret, error) {
	if repo.Spec.WebhookSecret == "" {
		return webhookSecret{shared: h.o.Secret}, nil
	}
	s := &corev1.Secret{}
	err := h.o.SecretReader.Get(ctx, client.ObjectKey{Namespace: repo.Namespace, Name: repo.Spec.WebhookSecret}, s)
	if apierrors.IsNotFound(err) {
		return webhookSecret{}, outcome.Stallf(fleet.ReasonSecretNotFound, "webhookSecret %s not found in namespace %s: create it or fix the name", repo.Spec.WebhookSecret, repo.Namespace)
	}
	if err != nil {
		return webhookSecret{}, fmt.Errorf("reading webhookSecret %s: %w", repo.Spec.WebhookSecret, err)
	}
	ws := webhookSecret{shared: s.Data[SecretKey], hosts: map[string][]byte{}, named: true}
	for _, k := range hostSecretKeys {
		if len(s.Data[k]) > 0 {
			ws.hosts[k] = s.Data[k]
		}
	}
	if len(ws.shared) == 0 && len(ws.hosts) == 0 {
		return webhookSecret{}, outcome.Stallf(fleet.ReasonInvalidOptions, "webhookSecret %s has no %q key nor a key of one host (%s): put the shared secret under %q",
			repo.Spec.WebhookSecret, SecretKey, strings.Join(hostSecretKeys, ", "), SecretKey)
	}
	return ws, nil
}

// trigger records the pushed commit in the GitRepo's status; the GitRepo
// controller polls when it changes.
func (h *webhook) trigger(ctx context.Context, repo *fleet.GitRepo, commit string) error {
	if repo.Status.WebhookCommit == commit {
		return nil
	}
	patch := client.MergeFrom(repo.DeepCopy())
	repo.Status.WebhookCommit = commit
	return h.c.Status().Patch(ctx, repo, patch)
}

// refMatches says whether a push to ref concerns repo: a push to the branch
// it follows (the default branch when it names none). A GitRepo pinned to a
// revision is told of every push and lets its poll decide.
func refMatches(repo *fleet.GitRepo, ref, defaultBranch string) bool {
	if repo.Spec.Revision != "" {
		return true
	}
	branch, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok {
		return false
	}
	if repo.Spec.Branch == "" {
		return defaultBranch == "" || branch == defaultBranch
	}
	return branch == repo.Spec.Branch
}

func reply(w http.ResponseWriter, code int, resp Response) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(resp) //nolint:errchkjson // the status is sent: a failed write is the caller gone, with no one left to tell
}

// validCommit tells whether s is a full SHA-1 or SHA-256 object name: what
// a push names, and all that goes into a GitRepo's status.
func validCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func addOnce(ss []string, s string) []string {
	for _, x := range ss {
		if x == s {
			return ss
		}
	}
	return append(ss, s)
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func firstOr(ss []string, def string) string {
	if len(ss) > 0 {
		return ss[0]
	}
	return def
}
