package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestNormalizeRepoURL(t *testing.T) {
	want := "github.com/org/repo"
	for _, u := range []string{
		"https://github.com/org/repo",
		"https://github.com/org/repo.git",
		"https://github.com/org/repo/",
		"http://github.com/Org/Repo.git",
		"https://user:token@github.com/org/repo.git",
		"https://github.com:443/org/repo",
		"git@github.com:org/repo.git",
		"ssh://git@github.com/org/repo.git",
		"ssh://git@github.com:22/org/repo",
		"git://github.com/org/repo.git",
		"github.com/org/repo",
	} {
		NewWithT(t).Expect(NormalizeRepoURL(u)).To(Equal(want), u)
	}
	g := NewWithT(t)
	g.Expect(NormalizeRepoURL("https://gitlab.com/group/sub/repo.git")).To(Equal("gitlab.com/group/sub/repo"))
	g.Expect(NormalizeRepoURL("https://github.com/org/other")).NotTo(Equal(want))
	g.Expect(NormalizeRepoURL("/srv/git/repo")).To(Equal("/srv/git/repo"))

	azure := "dev.azure.com/org/project/repo"
	for _, u := range []string{
		"https://dev.azure.com/org/project/_git/repo",
		"https://org@dev.azure.com/org/project/_git/repo",
		"https://dev.azure.com/Org/Project/_git/Repo/",
		"git@ssh.dev.azure.com:v3/org/project/repo",
		"ssh://git@ssh.dev.azure.com/v3/org/project/repo",
		"org@vs-ssh.visualstudio.com:v3/org/project/repo",
		"https://org.visualstudio.com/project/_git/repo",
		"https://org.visualstudio.com/DefaultCollection/project/_git/repo",
	} {
		g.Expect(NormalizeRepoURL(u)).To(Equal(azure), u)
	}
	g.Expect(NormalizeRepoURL("https://dev.azure.com/org/project/_git/other")).NotTo(Equal(azure))
	g.Expect(NormalizeRepoURL("git@ssh.dev.azure.com:v3/org/other/repo")).NotTo(Equal(azure))
}

func sign(body, secret []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func TestVerify(t *testing.T) {
	body := []byte(`{"ref":"refs/heads/main"}`)
	shared := webhookSecret{shared: []byte("s3cret")}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	hex256 := func(secret string) string { return strings.TrimPrefix(sign(body, []byte(secret)), "sha256=") }
	basic := func(user, pass string) string {
		r := &http.Request{Header: http.Header{}}
		r.SetBasicAuth(user, pass)
		return r.Header.Get("Authorization")
	}
	// Every host has its own key here, and the shared token is another.
	perHost := webhookSecret{shared: []byte("shared"), named: true, hosts: map[string][]byte{
		HostGitHub: []byte("gh"), HostGitLab: []byte("gl"), HostBitbucket: []byte("{bb-uuid}"), HostBitbucketServer: []byte("bbs"),
		HostGogs: []byte("gogs"), AzureUsernameKey: []byte("az-user"), AzurePasswordKey: []byte("az-pass"),
	}}
	onlyGitHub := webhookSecret{named: true, hosts: map[string][]byte{HostGitHub: []byte("gh")}}
	for name, tc := range map[string]struct {
		provider string
		hdr      http.Header
		secret   webhookSecret
		fails    string
	}{
		"github signed":          {HostGitHub, hdr("X-Hub-Signature-256", sign(body, []byte("s3cret"))), shared, ""},
		"github wrong secret":    {HostGitHub, hdr("X-Hub-Signature-256", sign(body, []byte("other"))), shared, "does not match"},
		"github not hex":         {HostGitHub, hdr("X-Hub-Signature-256", "sha256=zz"), shared, "does not match"},
		"github sha1 only":       {HostGitHub, hdr("X-Hub-Signature", "sha1=00"), shared, "missing X-Hub-Signature-256"},
		"github no secret":       {HostGitHub, hdr(), webhookSecret{}, ""},
		"gitlab token":           {HostGitLab, hdr("X-Gitlab-Token", "s3cret"), shared, ""},
		"gitlab wrong token":     {HostGitLab, hdr("X-Gitlab-Token", "s3cre"), shared, "does not match"},
		"gitlab missing token":   {HostGitLab, hdr(), shared, "missing X-Gitlab-Token"},
		"gitlab secret optional": {HostGitLab, hdr("X-Gitlab-Token", "anything"), webhookSecret{}, ""},

		"per-host github":                 {HostGitHub, hdr("X-Hub-Signature-256", sign(body, []byte("gh"))), perHost, ""},
		"per-host github, shared key":     {HostGitHub, hdr("X-Hub-Signature-256", sign(body, []byte("shared"))), perHost, "does not match"},
		"per-host gitlab":                 {HostGitLab, hdr("X-Gitlab-Token", "gl"), perHost, ""},
		"per-host gitlab, github's key":   {HostGitLab, hdr("X-Gitlab-Token", "gh"), perHost, "does not match"},
		"bitbucket uuid":                  {HostBitbucket, hdr("X-Hook-UUID", "{bb-uuid}"), perHost, ""},
		"bitbucket wrong uuid":            {HostBitbucket, hdr("X-Hook-UUID", "{other}"), perHost, "X-Hook-UUID does not match"},
		"bitbucket shared token":          {HostBitbucket, hdr("X-Hook-UUID", "s3cret"), shared, ""},
		"bitbucket-server signed":         {HostBitbucketServer, hdr("X-Hub-Signature", sign(body, []byte("bbs"))), perHost, ""},
		"bitbucket-server, gogs' key":     {HostBitbucketServer, hdr("X-Hub-Signature", sign(body, []byte("gogs"))), perHost, "X-Hub-Signature does not match"},
		"bitbucket-server missing":        {HostBitbucketServer, hdr(), perHost, "missing X-Hub-Signature"},
		"gogs signed":                     {HostGogs, hdr("X-Gogs-Signature", hex256("gogs")), perHost, ""},
		"gogs with sha256= prefix":        {HostGogs, hdr("X-Gogs-Signature", sign(body, []byte("gogs"))), perHost, "does not match"},
		"gogs, bitbucket-server's key":    {HostGogs, hdr("X-Gogs-Signature", hex256("bbs")), perHost, "does not match"},
		"azure basic auth":                {HostAzureDevOps, hdr("Authorization", basic("az-user", "az-pass")), perHost, ""},
		"azure wrong user":                {HostAzureDevOps, hdr("Authorization", basic("other", "az-pass")), perHost, "do not match"},
		"azure shared key as password":    {HostAzureDevOps, hdr("Authorization", basic("az-user", "shared")), perHost, "do not match"},
		"azure no auth":                   {HostAzureDevOps, hdr(), perHost, "missing basic auth"},
		"azure shared token":              {HostAzureDevOps, hdr("Authorization", basic("anyone", "s3cret")), shared, ""},
		"a host without a key is refused": {HostGogs, hdr("X-Gogs-Signature", hex256("gh")), onlyGitHub, `no "gogs" key`},
		"azure without a key is refused":  {HostAzureDevOps, hdr("Authorization", basic("a", "gh")), onlyGitHub, "no \"azure-username\""},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			why := verify(tc.provider, tc.hdr, body, tc.secret)
			if tc.fails == "" {
				g.Expect(why).To(BeEmpty())
			} else {
				g.Expect(why).To(ContainSubstring(tc.fails))
			}
		})
	}
}

func TestParsePush(t *testing.T) {
	github := `{"ref":"refs/heads/main","after":"abc1230000000000000000000000000000000000","repository":{"clone_url":"https://github.com/org/repo.git","ssh_url":"git@github.com:org/repo.git","html_url":"https://github.com/org/repo","default_branch":"main"}}`
	gitlab := `{"ref":"refs/heads/dev","after":"def4560000000000000000000000000000000000","checkout_sha":"def4560000000000000000000000000000000000","project":{"git_http_url":"https://gitlab.com/g/repo.git","git_ssh_url":"git@gitlab.com:g/repo.git","default_branch":"main"}}`
	g := NewWithT(t)

	p, ignored, err := parsePush(http.Header{"X-Github-Event": {"push"}}, []byte(github))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ignored).To(BeEmpty())
	g.Expect(p).To(Equal(push{provider: "github", ref: "refs/heads/main", commit: "abc1230000000000000000000000000000000000", defaultBranch: "main",
		urls: []string{"https://github.com/org/repo.git", "git@github.com:org/repo.git", "https://github.com/org/repo"}}))

	form := "payload=" + url.QueryEscape(github)
	p, _, err = parsePush(http.Header{"X-Github-Event": {"push"}, "Content-Type": {"application/x-www-form-urlencoded"}}, []byte(form))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.commit).To(Equal("abc1230000000000000000000000000000000000"))

	p, _, err = parsePush(http.Header{"X-Gitlab-Event": {"Push Hook"}}, []byte(gitlab))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.provider).To(Equal("gitlab"))
	g.Expect(p.urls).To(ContainElement("git@gitlab.com:g/repo.git"))

	_, ignored, err = parsePush(http.Header{"X-Github-Event": {"ping"}}, []byte(`{}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ignored).To(Equal("ignored GitHub ping event"))
	_, ignored, _ = parsePush(http.Header{"X-Github-Event": {"push"}}, []byte(`{"ref":"refs/heads/x","after":"0000000000000000000000000000000000000000","repository":{"clone_url":"u"}}`))
	g.Expect(ignored).To(ContainSubstring("deletes refs/heads/x"))
	_, _, err = parsePush(http.Header{}, []byte(github))
	g.Expect(err).To(MatchError(ContainSubstring("unsupported webhook")))
	_, _, err = parsePush(http.Header{"X-Github-Event": {"push"}}, []byte(`{`))
	g.Expect(err).To(MatchError(ContainSubstring("invalid GitHub push payload")))
	for _, commit := range []string{"abc123", strings.Repeat("a", 10240), strings.Repeat("g", 40), strings.Repeat("a", 41)} {
		_, _, err = parsePush(http.Header{"X-Github-Event": {"push"}}, []byte(strings.Replace(github, "abc1230000000000000000000000000000000000", commit, 1)))
		g.Expect(err).To(MatchError(ContainSubstring("not a full hex object name")), "commit %.20s", commit)
	}
	_, _, err = parsePush(http.Header{"X-Github-Event": {"push"}}, []byte(strings.Replace(github, "abc1230000000000000000000000000000000000", strings.Repeat("0a", 32), 1)))
	g.Expect(err).NotTo(HaveOccurred(), "a SHA-256 object name")
}

// The pushes of Bitbucket Cloud, Bitbucket Server, Gogs and Azure DevOps,
// trimmed from the hosts' documented payloads.
func TestParsePushOtherHosts(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	for name, tc := range map[string]struct {
		hdr  http.Header
		body string
		want push
	}{
		"bitbucket cloud": {
			http.Header{"X-Hook-Uuid": {"{u}"}, "X-Event-Key": {"repo:push"}},
			`{"push":{"changes":[{"new":{"type":"branch","name":"main","target":{"hash":"` + sha + `"}}}]},` +
				`"repository":{"full_name":"org/repo","links":{"html":{"href":"https://bitbucket.org/org/repo"}}}}`,
			push{provider: HostBitbucket, ref: "refs/heads/main", commit: sha, urls: []string{"https://bitbucket.org/org/repo"}},
		},
		"bitbucket cloud tag": {
			http.Header{"X-Hook-Uuid": {"{u}"}, "X-Event-Key": {"repo:push"}},
			`{"push":{"changes":[{"new":{"type":"tag","name":"v1","target":{"hash":"` + sha + `"}}}]},"repository":{"links":{"html":{"href":"https://bitbucket.org/org/repo"}}}}`,
			push{provider: HostBitbucket, ref: "refs/tags/v1", commit: sha, urls: []string{"https://bitbucket.org/org/repo"}},
		},
		"bitbucket server": {
			http.Header{"X-Event-Key": {"repo:refs_changed"}},
			`{"eventKey":"repo:refs_changed","changes":[{"refId":"refs/heads/main","toHash":"` + sha + `","type":"UPDATE"}],` +
				`"repository":{"links":{"clone":[{"href":"https://bb.example.com/scm/prj/repo.git","name":"http"},{"href":"ssh://git@bb.example.com:7999/prj/repo.git","name":"ssh"}]}}}`,
			push{provider: HostBitbucketServer, ref: "refs/heads/main", commit: sha,
				urls: []string{"https://bb.example.com/scm/prj/repo.git", "ssh://git@bb.example.com:7999/prj/repo.git"}},
		},
		"gogs, which also sends GitHub's headers": {
			http.Header{"X-Gogs-Event": {"push"}, "X-Github-Event": {"push"}},
			`{"ref":"refs/heads/dev","after":"` + sha + `","repository":{"html_url":"https://gogs.example.com/org/repo","clone_url":"https://gogs.example.com/org/repo.git","default_branch":"main"}}`,
			push{provider: HostGogs, ref: "refs/heads/dev", commit: sha, defaultBranch: "main",
				urls: []string{"https://gogs.example.com/org/repo.git", "https://gogs.example.com/org/repo"}},
		},
		"azure devops": {
			http.Header{"X-Vss-Activityid": {"a"}},
			`{"eventType":"git.push","resource":{"refUpdates":[{"name":"refs/heads/main","newObjectId":"` + sha + `"}],` +
				`"repository":{"remoteUrl":"https://org@dev.azure.com/org/project/_git/repo","defaultBranch":"refs/heads/main"}}}`,
			push{provider: HostAzureDevOps, ref: "refs/heads/main", commit: sha, defaultBranch: "main",
				urls: []string{"https://org@dev.azure.com/org/project/_git/repo"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			p, ignored, err := parsePush(tc.hdr, []byte(tc.body))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ignored).To(BeEmpty())
			g.Expect(p).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	_, ignored, err := parsePush(http.Header{"X-Event-Key": {"diagnostics:ping"}}, []byte(`{}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ignored).To(Equal("ignored Bitbucket Server diagnostics:ping event"))
	_, ignored, _ = parsePush(http.Header{"X-Vss-Subscriptionid": {"s"}}, []byte(`{"eventType":"git.pullrequest.created"}`))
	g.Expect(ignored).To(Equal("ignored Azure DevOps git.pullrequest.created event"))
	_, ignored, _ = parsePush(http.Header{"X-Hook-Uuid": {"{u}"}, "X-Event-Key": {"repo:push"}}, []byte(`{"push":{"changes":[{"new":null}]}}`))
	g.Expect(ignored).To(ContainSubstring("deletes"))
	_, _, err = parsePush(http.Header{"X-Gogs-Event": {"push"}}, []byte(`{"ref":"refs/heads/x","after":"../x","repository":{"html_url":"u"}}`))
	g.Expect(err).To(MatchError(ContainSubstring("not a full hex object name")))
}

func TestSourceLimits(t *testing.T) {
	g := NewWithT(t)
	l := newSourceLimits(1, 3)
	for range 3 {
		g.Expect(l.allow("10.0.0.1:1234")).To(BeTrue())
	}
	g.Expect(l.allow("10.0.0.1:5678")).To(BeFalse(), "another port of the same address shares its bucket")
	g.Expect(l.allow("10.0.0.2:1234")).To(BeTrue(), "another address has its own bucket")
}

func TestRefMatches(t *testing.T) {
	repo := func(branch, revision string) *fleet.GitRepo {
		return &fleet.GitRepo{Spec: fleet.GitRepoSpec{Branch: branch, Revision: revision}}
	}
	for name, tc := range map[string]struct {
		repo          *fleet.GitRepo
		ref, dflt     string
		wantTriggered bool
	}{
		"followed branch":           {repo("dev", ""), "refs/heads/dev", "main", true},
		"other branch":              {repo("dev", ""), "refs/heads/main", "main", false},
		"default branch":            {repo("", ""), "refs/heads/main", "main", true},
		"not the default branch":    {repo("", ""), "refs/heads/dev", "main", false},
		"default branch unknown":    {repo("", ""), "refs/heads/dev", "", true},
		"tag push, branch repo":     {repo("main", ""), "refs/tags/v1", "main", false},
		"revision repo hears all":   {repo("", "v1"), "refs/tags/v1", "main", true},
		"revision wins over branch": {repo("dev", "v1"), "refs/heads/main", "main", true},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(refMatches(tc.repo, tc.ref, tc.dflt)).To(Equal(tc.wantTriggered))
		})
	}
}
