package notify

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// The public API of each git host, used when the destination names none.
const (
	DefaultGitHubAPI    = "https://api.github.com"
	DefaultGitLabURL    = "https://gitlab.com"
	DefaultBitbucketAPI = "https://api.bitbucket.org"
)

// Description bounds of the hosts (GitHub keeps 140 characters, Bitbucket
// keys 40).
const (
	maxDescription  = 140
	maxBitbucketKey = 40
)

// RepoPath is the "owner/name" (GitLab: "group/subgroup/name") path of a
// repository URL: https://host/o/r.git, ssh://git@host/o/r.git or
// git@host:o/r.git; host is the URL's host.
func RepoPath(repoURL string) (host, path string, ok bool) {
	s := strings.TrimSpace(repoURL)
	if s == "" {
		return "", "", false
	}
	if !strings.Contains(s, "://") {
		// scp-like: [user@]host:path
		at := strings.LastIndex(s, "@")
		rest := s[at+1:]
		h, p, found := strings.Cut(rest, ":")
		if !found {
			return "", "", false
		}
		host, path = h, p
	} else {
		u, err := url.Parse(s)
		if err != nil {
			return "", "", false
		}
		host, path = u.Hostname(), u.Path
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	if host == "" || strings.Count(path, "/") < 1 {
		return "", "", false
	}
	return host, path, true
}

// CommitURL is the web page of commit rev of repoURL on the known hosts
// (GitHub, GitLab, Bitbucket and Gitea-like hosts use /commit/ or
// /-/commit/ or /commits/), "" when the URL is not understood.
func CommitURL(kind notification.DestinationType, repoURL, rev string) string {
	host, path, ok := RepoPath(repoURL)
	if !ok || rev == "" {
		return ""
	}
	base := "https://" + host + "/" + path
	switch {
	case kind == notification.DestinationGitLab || strings.Contains(host, "gitlab"):
		return base + "/-/commit/" + rev
	case kind == notification.DestinationBitbucket || host == "bitbucket.org":
		return base + "/commits/" + rev
	}
	return base + "/commit/" + rev
}

// commitStatus is the request that sets m's commit status on t's host.
func commitStatus(t Target, m *Message) (request, error) {
	state := CommitState(m.Event)
	if state == "" || m.Kind != string(notification.KindGitRepo) {
		return request{}, ErrNotApplicable
	}
	_, path, ok := RepoPath(t.RepoURL)
	if !ok {
		return request{}, outcome.Stallf(notification.ReasonInvalidSpec,
			"the repository %q names no owner and repository, so no commit status can be set: use an https or ssh URL of the git host", t.RepoURL)
	}
	ctxName := t.Context
	if ctxName == "" {
		ctxName = "fleet/" + m.Name
	}
	desc := Truncate(m.Text, maxDescription)
	target := m.CommitURL
	var (
		endpoint string
		payload  any
		headers  = map[string]string{}
	)
	switch t.Type {
	case notification.DestinationGitHub:
		endpoint = apiBase(t.Address, DefaultGitHubAPI) + "/repos/" + path + "/statuses/" + url.PathEscape(m.Revision)
		payload = map[string]string{"state": string(state), "target_url": target, "description": desc, "context": ctxName}
		headers["Accept"] = "application/vnd.github+json"
		headers["X-GitHub-Api-Version"] = "2022-11-28"
		headers["Authorization"] = "Bearer " + t.Token
	case notification.DestinationGitLab:
		endpoint = apiBase(t.Address, DefaultGitLabURL) + "/api/v4/projects/" + url.PathEscape(path) + "/statuses/" + url.PathEscape(m.Revision)
		payload = map[string]string{"state": gitlabState(state), "target_url": target, "description": desc, "name": ctxName}
		headers["PRIVATE-TOKEN"] = t.Token
	case notification.DestinationBitbucket:
		endpoint = apiBase(t.Address, DefaultBitbucketAPI) + "/2.0/repositories/" + path + "/commit/" + url.PathEscape(m.Revision) + "/statuses/build"
		if target == "" {
			target = CommitURL(t.Type, t.RepoURL, m.Revision)
		}
		payload = map[string]string{"key": Truncate(ctxName, maxBitbucketKey), "state": bitbucketState(state), "name": ctxName, "url": target, "description": desc}
		if t.Username != "" {
			headers["Authorization"] = "Basic " + basic(t.Username, t.Password)
		} else {
			headers["Authorization"] = "Bearer " + t.Token
		}
	case notification.DestinationGitea:
		if err := needAddress(t); err != nil {
			return request{}, err
		}
		endpoint = apiBase(t.Address, "") + "/api/v1/repos/" + path + "/statuses/" + url.PathEscape(m.Revision)
		payload = map[string]string{"state": string(state), "target_url": target, "description": desc, "context": ctxName}
		headers["Authorization"] = "token " + t.Token
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return request{}, fmt.Errorf("encoding the commit status: %w", err)
	}
	return request{url: endpoint, body: body, headers: headers}, nil
}

func apiBase(address, def string) string {
	if address == "" {
		address = def
	}
	return strings.TrimRight(address, "/")
}

// gitlabState: GitLab's commit status says running while rolling out.
func gitlabState(s State) string {
	switch s {
	case StatePending:
		return "running"
	case StateSuccess:
		return "success"
	}
	return "failed"
}

func bitbucketState(s State) string {
	switch s {
	case StatePending:
		return "INPROGRESS"
	case StateSuccess:
		return "SUCCESSFUL"
	}
	return "FAILED"
}

func basic(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}
