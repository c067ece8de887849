package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// The git hosts whose push webhooks the manager takes, as push.provider
// and, but for Azure DevOps, as the key of their own secret in a GitRepo's
// webhookSecret Secret (Fleet's keys).
const (
	HostGitHub          = "github"
	HostGitLab          = "gitlab"
	HostBitbucket       = "bitbucket"
	HostBitbucketServer = "bitbucket-server"
	HostGogs            = "gogs"
	HostAzureDevOps     = "azure"
)

// The keys of Azure DevOps' basic auth credentials in a webhookSecret
// Secret.
const (
	AzureUsernameKey = "azure-username"
	AzurePasswordKey = "azure-password"
)

// hostSecretKeys are the keys of a webhookSecret Secret that hold one host's
// secret; each overrides the shared SecretKey for its host.
var hostSecretKeys = []string{HostGitHub, HostGitLab, HostBitbucket, HostBitbucketServer, HostGogs, AzureUsernameKey, AzurePasswordKey}

// webhookSecret is what the calls for one GitRepo must carry.
type webhookSecret struct {
	// shared is the secret of every host without its own; empty with no
	// per-host key means calls need none (a GitRepo without webhookSecret
	// on a manager without a webhook secret).
	shared []byte
	// hosts are the per-host keys of the GitRepo's webhookSecret Secret.
	hosts map[string][]byte
	// named tells that the GitRepo names a webhookSecret: its calls are
	// always verified, and a host with no key of its own and no shared
	// key is refused.
	named bool
}

// verify checks the call against the secret and says why it fails ("" when
// it passes). Each host is checked with its own scheme: GitHub an
// HMAC-SHA256 of the body in X-Hub-Signature-256, Bitbucket Server in
// X-Hub-Signature, Gogs in X-Gogs-Signature; GitLab a token in
// X-Gitlab-Token; Bitbucket Cloud the webhook's UUID in X-Hook-UUID; Azure
// DevOps basic auth. Secrets are compared in constant time.
func verify(provider string, hdr http.Header, body []byte, s webhookSecret) string {
	if provider == HostAzureDevOps {
		return verifyAzure(hdr, s)
	}
	secret := s.hosts[provider]
	if len(secret) == 0 {
		secret = s.shared
	}
	if len(secret) == 0 {
		if s.named {
			return fmt.Sprintf("the webhookSecret has no %q key and no %q key: add the %s webhook's secret under one", provider, SecretKey, provider)
		}
		return ""
	}
	switch provider {
	case HostGitHub:
		return checkHMAC(hdr, "X-Hub-Signature-256", "sha256=", body, secret, "set the webhook's secret in GitHub")
	case HostBitbucketServer:
		return checkHMAC(hdr, "X-Hub-Signature", "sha256=", body, secret, "set the webhook's secret in Bitbucket Server")
	case HostGogs:
		return checkHMAC(hdr, "X-Gogs-Signature", "", body, secret, "set the webhook's secret in Gogs")
	case HostGitLab:
		return checkToken(hdr, "X-Gitlab-Token", secret, "set the webhook's secret token in GitLab")
	case HostBitbucket:
		return checkToken(hdr, "X-Hook-UUID", secret, "Bitbucket Cloud sends the webhook's UUID")
	}
	return "unknown provider " + provider
}

// checkHMAC checks a header holding prefix and the hex HMAC-SHA256 of body.
func checkHMAC(hdr http.Header, name, prefix string, body, secret []byte, hint string) string {
	v := hdr.Get(name)
	if v == "" {
		return fmt.Sprintf("missing %s header: %s", name, hint)
	}
	sig, ok := strings.CutPrefix(v, prefix)
	got, err := hex.DecodeString(sig)
	if !ok || err != nil {
		return name + " does not match the webhook secret"
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), got) {
		return name + " does not match the webhook secret"
	}
	return ""
}

// checkToken checks a header holding the secret itself.
func checkToken(hdr http.Header, name string, secret []byte, hint string) string {
	v := hdr.Get(name)
	if v == "" {
		return fmt.Sprintf("missing %s header: %s", name, hint)
	}
	if subtle.ConstantTimeCompare([]byte(v), secret) != 1 {
		return name + " does not match the webhook secret"
	}
	return ""
}

// verifyAzure checks Azure DevOps' basic auth: azure-username and
// azure-password when the Secret has them (any user name without
// azure-username), else any user name with the shared secret as password.
func verifyAzure(hdr http.Header, s webhookSecret) string {
	wantUser, wantPass := s.hosts[AzureUsernameKey], s.hosts[AzurePasswordKey]
	own := len(wantPass) > 0 || len(wantUser) > 0
	if !own {
		wantPass = s.shared
	}
	if len(wantPass) == 0 && !own {
		if s.named {
			return fmt.Sprintf("the webhookSecret has no %q/%q keys and no %q key: add the Azure DevOps service hook's basic auth credentials",
				AzureUsernameKey, AzurePasswordKey, SecretKey)
		}
		return ""
	}
	user, pass, ok := (&http.Request{Header: hdr}).BasicAuth()
	if !ok {
		return "missing basic auth (Authorization header): set the service hook's user name and password in Azure DevOps"
	}
	userOK := len(wantUser) == 0 || subtle.ConstantTimeCompare([]byte(user), wantUser) == 1
	passOK := subtle.ConstantTimeCompare([]byte(pass), wantPass) == 1
	if !userOK || !passOK {
		return "the basic auth credentials do not match the webhook secret"
	}
	return ""
}

// parsePush reads a push event; ignored explains why another event is
// accepted without action. Gogs is tried first, since it also sends
// GitHub's headers; Bitbucket Cloud before Bitbucket Server, since both send
// X-Event-Key.
func parsePush(hdr http.Header, body []byte) (p push, ignored string, err error) {
	switch {
	case hdr.Get("X-Gogs-Event") != "":
		p, ignored, err = parseGogs(hdr, body)
	case hdr.Get("X-GitHub-Event") != "":
		p, ignored, err = parseGitHub(hdr, body)
	case hdr.Get("X-Gitlab-Event") != "":
		p, ignored, err = parseGitLab(hdr, body)
	case hdr.Get("X-Hook-UUID") != "":
		p, ignored, err = parseBitbucket(hdr, body)
	case hdr.Get("X-Event-Key") != "":
		p, ignored, err = parseBitbucketServer(hdr, body)
	case hdr.Get("X-Vss-Activityid") != "" || hdr.Get("X-Vss-Subscriptionid") != "":
		p, ignored, err = parseAzure(body)
	default:
		return p, "", errors.New("unsupported webhook: expected a GitHub (X-GitHub-Event), GitLab (X-Gitlab-Event), Bitbucket Cloud (X-Hook-UUID), " +
			"Bitbucket Server (X-Event-Key), Gogs (X-Gogs-Event) or Azure DevOps (X-Vss-ActivityId) call")
	}
	if err != nil || ignored != "" {
		return p, ignored, err
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

func parseGitHub(hdr http.Header, body []byte) (p push, ignored string, err error) {
	if ev := hdr.Get("X-GitHub-Event"); ev != "push" {
		return p, fmt.Sprintf("ignored GitHub %s event", ev), nil
	}
	if ct, _, _ := mime.ParseMediaType(hdr.Get("Content-Type")); ct == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return p, "", fmt.Errorf("invalid form payload: %v", err)
		}
		body = []byte(form.Get("payload"))
	}
	var ev struct {
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
	if err := json.Unmarshal(body, &ev); err != nil {
		return p, "", fmt.Errorf("invalid GitHub push payload: %v", err)
	}
	r := ev.Repository
	return push{provider: HostGitHub, ref: ev.Ref, commit: ev.After, defaultBranch: r.DefaultBranch,
		urls: nonEmpty(r.CloneURL, r.SSHURL, r.HTMLURL, r.GitURL, r.URL)}, "", nil
}

func parseGitLab(hdr http.Header, body []byte) (p push, ignored string, err error) {
	if ev := hdr.Get("X-Gitlab-Event"); ev != "Push Hook" && ev != "Tag Push Hook" {
		return p, fmt.Sprintf("ignored GitLab %s event", ev), nil
	}
	var ev struct {
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
	if err := json.Unmarshal(body, &ev); err != nil {
		return p, "", fmt.Errorf("invalid GitLab push payload: %v", err)
	}
	commit := ev.CheckoutSHA
	if commit == "" {
		commit = ev.After
	}
	pr, r := ev.Project, ev.Repository
	return push{provider: HostGitLab, ref: ev.Ref, commit: commit, defaultBranch: pr.DefaultBranch,
		urls: nonEmpty(pr.GitHTTPURL, pr.GitSSHURL, pr.WebURL, r.GitHTTPURL, r.GitSSHURL, r.URL, r.Homepage)}, "", nil
}

// parseGogs reads a Gogs push.
func parseGogs(hdr http.Header, body []byte) (p push, ignored string, err error) {
	if ev := hdr.Get("X-Gogs-Event"); ev != "push" {
		return p, fmt.Sprintf("ignored Gogs %s event", ev), nil
	}
	var ev struct {
		Ref        string `json:"ref"`
		After      string `json:"after"`
		Repository struct {
			HTMLURL       string `json:"html_url"`
			CloneURL      string `json:"clone_url"`
			SSHURL        string `json:"ssh_url"`
			DefaultBranch string `json:"default_branch"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return p, "", fmt.Errorf("invalid Gogs push payload: %v", err)
	}
	r := ev.Repository
	return push{provider: HostGogs, ref: ev.Ref, commit: ev.After, defaultBranch: r.DefaultBranch,
		urls: nonEmpty(r.CloneURL, r.SSHURL, r.HTMLURL)}, "", nil
}

// parseBitbucket reads a Bitbucket Cloud repo:push; its first change is the
// push (Fleet reads the first too).
func parseBitbucket(hdr http.Header, body []byte) (p push, ignored string, err error) {
	if ev := hdr.Get("X-Event-Key"); ev != "repo:push" {
		return p, fmt.Sprintf("ignored Bitbucket %s event", ev), nil
	}
	var ev struct {
		Push struct {
			Changes []struct {
				New *struct {
					Type   string `json:"type"`
					Name   string `json:"name"`
					Target struct {
						Hash string `json:"hash"`
					} `json:"target"`
				} `json:"new"`
			} `json:"changes"`
		} `json:"push"`
		Repository struct {
			FullName string `json:"full_name"`
			Links    struct {
				HTML struct {
					Href string `json:"href"`
				} `json:"html"`
			} `json:"links"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return p, "", fmt.Errorf("invalid Bitbucket push payload: %v", err)
	}
	if len(ev.Push.Changes) == 0 {
		return p, "", errors.New("the Bitbucket push payload lists no change")
	}
	n := ev.Push.Changes[0].New
	if n == nil {
		return p, "ignored Bitbucket push that deletes a branch or tag", nil
	}
	ref := "refs/heads/" + n.Name
	if n.Type == "tag" {
		ref = "refs/tags/" + n.Name
	}
	return push{provider: HostBitbucket, ref: ref, commit: n.Target.Hash, urls: nonEmpty(ev.Repository.Links.HTML.Href)}, "", nil
}

// parseBitbucketServer reads a Bitbucket Server (Data Center)
// repo:refs_changed; its first change is the push.
func parseBitbucketServer(hdr http.Header, body []byte) (p push, ignored string, err error) {
	if ev := hdr.Get("X-Event-Key"); ev != "repo:refs_changed" {
		return p, fmt.Sprintf("ignored Bitbucket Server %s event", ev), nil
	}
	type link struct {
		Href string `json:"href"`
		Name string `json:"name"`
	}
	var ev struct {
		Changes []struct {
			RefID  string `json:"refId"`
			ToHash string `json:"toHash"`
		} `json:"changes"`
		Repository struct {
			Links struct {
				Clone []link `json:"clone"`
				Self  []link `json:"self"`
			} `json:"links"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return p, "", fmt.Errorf("invalid Bitbucket Server push payload: %v", err)
	}
	if len(ev.Changes) == 0 {
		return p, "", errors.New("the Bitbucket Server push payload lists no change")
	}
	var urls []string
	for _, l := range append(ev.Repository.Links.Clone, ev.Repository.Links.Self...) {
		urls = append(urls, nonEmpty(l.Href)...)
	}
	c := ev.Changes[0]
	return push{provider: HostBitbucketServer, ref: c.RefID, commit: c.ToHash, urls: urls}, "", nil
}

// parseAzure reads an Azure DevOps git.push service hook; its first ref
// update is the push.
func parseAzure(body []byte) (p push, ignored string, err error) {
	var ev struct {
		EventType string `json:"eventType"`
		Resource  struct {
			RefUpdates []struct {
				Name        string `json:"name"`
				NewObjectID string `json:"newObjectId"`
			} `json:"refUpdates"`
			Repository struct {
				RemoteURL     string `json:"remoteUrl"`
				SSHURL        string `json:"sshUrl"`
				WebURL        string `json:"webUrl"`
				DefaultBranch string `json:"defaultBranch"`
			} `json:"repository"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return p, "", fmt.Errorf("invalid Azure DevOps push payload: %v", err)
	}
	if ev.EventType != "git.push" {
		return p, fmt.Sprintf("ignored Azure DevOps %s event", ev.EventType), nil
	}
	if len(ev.Resource.RefUpdates) == 0 {
		return p, "", errors.New("the Azure DevOps push payload lists no ref update")
	}
	u, r := ev.Resource.RefUpdates[0], ev.Resource.Repository
	return push{provider: HostAzureDevOps, ref: u.Name, commit: u.NewObjectID,
		defaultBranch: strings.TrimPrefix(r.DefaultBranch, "refs/heads/"),
		urls:          nonEmpty(r.RemoteURL, r.SSHURL, r.WebURL)}, "", nil
}

// NormalizeRepoURL reduces a repository URL to host/path, lower case, so
// that the https, ssh and web URLs of one repository compare equal: scheme,
// user, port, trailing slash and .git are dropped, and scp-like
// git@host:path becomes host/path. Azure DevOps' forms
// (dev.azure.com/org/project/_git/repo, org.visualstudio.com/project/_git/repo,
// ssh.dev.azure.com:v3/org/project/repo, vs-ssh.visualstudio.com:v3/...)
// all become dev.azure.com/org/project/repo.
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
	s = strings.TrimSuffix(s, "/")
	return normalizeAzure(s)
}

// normalizeAzure maps the normalized forms of an Azure DevOps repository
// onto one.
func normalizeAzure(s string) string {
	host, path, _ := strings.Cut(s, "/")
	parts := strings.Split(path, "/")
	switch {
	case host == "dev.azure.com" && len(parts) == 4 && parts[2] == "_git":
		return "dev.azure.com/" + parts[0] + "/" + parts[1] + "/" + parts[3]
	case (host == "ssh.dev.azure.com" || host == "vs-ssh.visualstudio.com") && len(parts) == 4 && parts[0] == "v3":
		return "dev.azure.com/" + strings.Join(parts[1:], "/")
	case strings.HasSuffix(host, ".visualstudio.com") && host != "vs-ssh.visualstudio.com":
		org := strings.TrimSuffix(host, ".visualstudio.com")
		if len(parts) == 4 && parts[0] == "defaultcollection" {
			parts = parts[1:]
		}
		if len(parts) == 3 && parts[1] == "_git" {
			return "dev.azure.com/" + org + "/" + parts[0] + "/" + parts[2]
		}
	}
	return s
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
