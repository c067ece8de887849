package gitrepo

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
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

// WebhookSecretKey is the key, in the Secret named by a GitRepo's
// spec.webhookSecret, of the shared secret its webhook calls carry.
const WebhookSecretKey = "token"

// DefaultWebhookMaxBytes is the largest payload accepted. Push events are a
// few KiB; GitHub caps them at 25 MiB, but a push that large lists thousands
// of commits, and a poll of the repository needs none of them.
const DefaultWebhookMaxBytes = 1 << 20

// Default per-source rate of webhook calls: a steady rate per second and a
// burst, per remote IP address.
const (
	DefaultWebhookRate  = 5
	DefaultWebhookBurst = 20
)

// WebhookOptions configure the webhook handler.
type WebhookOptions struct {
	// SecretReader reads the Secrets named by spec.webhookSecret; default the
	// handler's client. Pass mgr.GetAPIReader() so no Secret is cached.
	SecretReader client.Reader
	// Secret, when set, is the shared secret required of calls for GitRepos
	// that name no webhookSecret; when empty, such calls need none.
	Secret []byte
	// MaxBodyBytes bounds the payload; default DefaultWebhookMaxBytes.
	MaxBodyBytes int64
	// Timeout bounds the handling of one call; default 10s.
	Timeout time.Duration
	// Rate and Burst limit the calls of one remote IP address (a token
	// bucket each); more are answered 429. Default DefaultWebhookRate and
	// DefaultWebhookBurst.
	Rate  rate.Limit
	Burst int
}

// NewWebhookHandler returns the handler for GitHub and GitLab push webhooks.
// A push to a repository and branch that GitRepos follow sets their
// status.webhookCommit to the pushed commit; the GitRepo controller sees the
// change and polls the repository at once, whatever its pollingInterval
// (also with disablePolling). Writing the status, rather than signalling the
// controller in memory, works whichever manager replica receives the call.
//
// GitHub calls must carry X-Hub-Signature-256 (HMAC-SHA256 of the body) and
// GitLab calls X-Gitlab-Token, made with the GitRepo's webhookSecret or, for
// a GitRepo without one, the manager-wide secret; a call that fails
// verification for every GitRepo it concerns is answered 401. Only without
// either secret are unsigned calls accepted.
//
// The handler is exposed to anyone who can reach the port: bodies are
// bounded (413), the commit must be a full hex object name (400), each
// remote address has its own rate (429), and replies name no GitRepo.
func NewWebhookHandler(c client.Client, o WebhookOptions) http.Handler {
	if o.SecretReader == nil {
		o.SecretReader = c
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultWebhookMaxBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Rate <= 0 {
		o.Rate = DefaultWebhookRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultWebhookBurst
	}
	return &webhook{c: c, o: o, limits: newSourceLimits(o.Rate, o.Burst)}
}

type webhook struct {
	c      client.Client
	o      WebhookOptions
	limits *sourceLimits
}

// push is what a push event says, whoever sent it.
type push struct {
	provider      string // "github" or "gitlab"
	ref           string
	commit        string
	defaultBranch string
	urls          []string
}

// WebhookResponse is the JSON body of the webhook's answers. It names no
// GitRepo: whoever can reach the port learns nothing of the namespaces and
// names of the manager's GitRepos; the manager's log does.
type WebhookResponse struct {
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
		reply(w, http.StatusTooManyRequests, WebhookResponse{Message: "too many webhook calls from this address; retry later"})
		return
	}
	if req.Method != http.MethodPost {
		reply(w, http.StatusMethodNotAllowed, WebhookResponse{Message: "only POST is accepted"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, h.o.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		reply(w, http.StatusRequestEntityTooLarge, WebhookResponse{Message: fmt.Sprintf("reading the payload: larger than %d bytes", h.o.MaxBodyBytes)})
		return
	case err != nil:
		reply(w, http.StatusBadRequest, WebhookResponse{Message: fmt.Sprintf("reading the payload: %v", err)})
		return
	}
	p, ignored, err := parsePush(req.Header, body)
	switch {
	case err != nil:
		reply(w, http.StatusBadRequest, WebhookResponse{Message: err.Error()})
		return
	case ignored != "":
		reply(w, http.StatusOK, WebhookResponse{Message: ignored})
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), h.o.Timeout)
	defer cancel()
	log := ctrl.LoggerFrom(ctx).WithName("gitrepo-webhook")

	repos := &fleet.GitRepoList{}
	if err := h.c.List(ctx, repos); err != nil {
		reply(w, http.StatusInternalServerError, WebhookResponse{Message: fmt.Sprintf("listing GitRepos: %v", err)})
		return
	}
	resp := WebhookResponse{Commit: p.commit}
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
	code := http.StatusOK
	switch {
	case len(resp.Failed) > 0:
		code, resp.Message = http.StatusInternalServerError, "some GitRepos could not be triggered; redeliver the call"
	case matched == 0:
		resp.Message = fmt.Sprintf("no GitRepo follows %s of %s", p.ref, firstOr(p.urls, "this repository"))
	case resp.Triggered == 0:
		code, resp.Message = http.StatusUnauthorized, "signature verification failed: the call does not carry the webhook secret of any GitRepo it concerns"
	default:
		resp.Message = fmt.Sprintf("triggered %d GitRepo(s)", resp.Triggered)
	}
	reply(w, code, resp)
}

// secret is the shared secret a call for repo must carry; nil when none is
// required.
func (h *webhook) secret(ctx context.Context, repo *fleet.GitRepo) ([]byte, error) {
	if repo.Spec.WebhookSecret == "" {
		return h.o.Secret, nil
	}
	s := &corev1.Secret{}
	err := h.o.SecretReader.Get(ctx, client.ObjectKey{Namespace: repo.Namespace, Name: repo.Spec.WebhookSecret}, s)
	if apierrors.IsNotFound(err) {
		return nil, outcome.Stallf(fleet.ReasonSecretNotFound, "webhookSecret %s not found in namespace %s: create it or fix the name", repo.Spec.WebhookSecret, repo.Namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("reading webhookSecret %s: %w", repo.Spec.WebhookSecret, err)
	}
	if len(s.Data[WebhookSecretKey]) == 0 {
		return nil, outcome.Stallf(fleet.ReasonInvalidOptions, "webhookSecret %s has no %q key: put the shared secret under it", repo.Spec.WebhookSecret, WebhookSecretKey)
	}
	return s.Data[WebhookSecretKey], nil
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

// verify checks the call against secret and says why it fails ("" when it
// passes). An empty secret accepts any call.
func verify(provider string, hdr http.Header, body, secret []byte) string {
	if len(secret) == 0 {
		return ""
	}
	switch provider {
	case "github":
		sig := hdr.Get("X-Hub-Signature-256")
		if sig == "" {
			return "missing X-Hub-Signature-256 header: set the webhook's secret in GitHub"
		}
		if !validGitHubSignature(body, sig, secret) {
			return "X-Hub-Signature-256 does not match the webhook secret"
		}
	case "gitlab":
		token := hdr.Get("X-Gitlab-Token")
		if token == "" {
			return "missing X-Gitlab-Token header: set the webhook's secret token in GitLab"
		}
		if subtle.ConstantTimeCompare([]byte(token), secret) != 1 {
			return "X-Gitlab-Token does not match the webhook secret"
		}
	default:
		return "unknown provider " + provider
	}
	return ""
}

// validGitHubSignature checks a "sha256=<hex HMAC-SHA256 of body>" header.
func validGitHubSignature(body []byte, header string, secret []byte) bool {
	sig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(mac.Sum(nil), got)
}

// parsePush reads a push event; ignored explains why another event is
// accepted without action.
func parsePush(hdr http.Header, body []byte) (p push, ignored string, err error) {
	switch {
	case hdr.Get("X-GitHub-Event") != "":
		ev := hdr.Get("X-GitHub-Event")
		if ev != "push" {
			return p, fmt.Sprintf("ignored GitHub %s event", ev), nil
		}
		if ct, _, _ := mime.ParseMediaType(hdr.Get("Content-Type")); ct == "application/x-www-form-urlencoded" {
			form, err := url.ParseQuery(string(body))
			if err != nil {
				return p, "", fmt.Errorf("invalid form payload: %v", err)
			}
			body = []byte(form.Get("payload"))
		}
		var ev2 struct {
			Ref        string `json:"ref"`
			After      string `json:"after"`
			Repository struct {
				CloneURL      string `json:"clone_url"`
				SSHURL        string `json:"ssh_url"`
				HTMLURL       string `json:"html_url"`
				GitURL        string `json:"git_url"`
				URL           string `json:"url"`
				DefaultBranch string `json:"default_branch"`
			} `json:"repository"`
		}
		if err := json.Unmarshal(body, &ev2); err != nil {
			return p, "", fmt.Errorf("invalid GitHub push payload: %v", err)
		}
		r := ev2.Repository
		p = push{provider: "github", ref: ev2.Ref, commit: ev2.After, defaultBranch: r.DefaultBranch,
			urls: nonEmpty(r.CloneURL, r.SSHURL, r.HTMLURL, r.GitURL, r.URL)}
	case hdr.Get("X-Gitlab-Event") != "":
		ev := hdr.Get("X-Gitlab-Event")
		if ev != "Push Hook" && ev != "Tag Push Hook" {
			return p, fmt.Sprintf("ignored GitLab %s event", ev), nil
		}
		var ev2 struct {
			Ref         string `json:"ref"`
			After       string `json:"after"`
			CheckoutSHA string `json:"checkout_sha"`
			Project     struct {
				GitHTTPURL    string `json:"git_http_url"`
				GitSSHURL     string `json:"git_ssh_url"`
				WebURL        string `json:"web_url"`
				DefaultBranch string `json:"default_branch"`
			} `json:"project"`
			Repository struct {
				URL        string `json:"url"`
				GitHTTPURL string `json:"git_http_url"`
				GitSSHURL  string `json:"git_ssh_url"`
				Homepage   string `json:"homepage"`
			} `json:"repository"`
		}
		if err := json.Unmarshal(body, &ev2); err != nil {
			return p, "", fmt.Errorf("invalid GitLab push payload: %v", err)
		}
		commit := ev2.CheckoutSHA
		if commit == "" {
			commit = ev2.After
		}
		pr, r := ev2.Project, ev2.Repository
		p = push{provider: "gitlab", ref: ev2.Ref, commit: commit, defaultBranch: pr.DefaultBranch,
			urls: nonEmpty(pr.GitHTTPURL, pr.GitSSHURL, pr.WebURL, r.GitHTTPURL, r.GitSSHURL, r.URL, r.Homepage)}
	default:
		return p, "", errors.New("unsupported webhook: expected a GitHub (X-GitHub-Event) or GitLab (X-Gitlab-Event) call")
	}
	if !validCommit(p.commit) {
		return p, "", errors.New("the push payload's commit is not a full hex object name (40 or 64 hex digits)")
	}
	if strings.Trim(p.commit, "0") == "" {
		return p, "ignored push that deletes " + p.ref, nil
	}
	if len(p.urls) == 0 {
		return p, "", errors.New("the push payload names no repository URL")
	}
	return p, "", nil
}

// NormalizeRepoURL reduces a repository URL to host/path, lower case, so
// that the https, ssh and web URLs of one repository compare equal: scheme,
// user, port, trailing slash and .git are dropped, and scp-like
// git@host:path becomes host/path.
func NormalizeRepoURL(u string) string {
	s := strings.TrimSpace(u)
	if i := strings.Index(s, "://"); i >= 0 {
		if pu, err := url.Parse(s); err == nil && pu.Host != "" {
			s = pu.Hostname() + "/" + pu.Path
		} else {
			s = s[i+3:]
		}
	} else if i := strings.Index(s, ":"); i > 0 && !strings.Contains(s[:i], "/") {
		host := s[:i]
		if at := strings.LastIndex(host, "@"); at >= 0 {
			host = host[at+1:]
		}
		s = host + "/" + s[i+1:]
	}
	s = strings.ToLower(s)
	for strings.Contains(s, "//") {
		s = strings.ReplaceAll(s, "//", "/")
	}
	s = strings.TrimSuffix(s, "/")
	s = strings.TrimSuffix(s, ".git")
	return strings.TrimSuffix(s, "/")
}

func urlMatches(repoURL string, urls []string) bool {
	want := NormalizeRepoURL(repoURL)
	for _, u := range urls {
		if NormalizeRepoURL(u) == want {
			return true
		}
	}
	return false
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

func reply(w http.ResponseWriter, code int, resp WebhookResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(resp)
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
