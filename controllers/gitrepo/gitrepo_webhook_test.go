package gitrepo

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
}

func sign(body, secret []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func TestVerify(t *testing.T) {
	body := []byte(`{"ref":"refs/heads/main"}`)
	secret := []byte("s3cret")
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for name, tc := range map[string]struct {
		provider string
		hdr      http.Header
		secret   []byte
		fails    string
	}{
		"github signed":          {"github", hdr("X-Hub-Signature-256", sign(body, secret)), secret, ""},
		"github wrong secret":    {"github", hdr("X-Hub-Signature-256", sign(body, []byte("other"))), secret, "does not match"},
		"github not hex":         {"github", hdr("X-Hub-Signature-256", "sha256=zz"), secret, "does not match"},
		"github sha1 only":       {"github", hdr("X-Hub-Signature", "sha1=00"), secret, "missing X-Hub-Signature-256"},
		"github no secret":       {"github", hdr(), nil, ""},
		"gitlab token":           {"gitlab", hdr("X-Gitlab-Token", "s3cret"), secret, ""},
		"gitlab wrong token":     {"gitlab", hdr("X-Gitlab-Token", "s3cre"), secret, "does not match"},
		"gitlab missing token":   {"gitlab", hdr(), secret, "missing X-Gitlab-Token"},
		"gitlab secret optional": {"gitlab", hdr("X-Gitlab-Token", "anything"), nil, ""},
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

func TestSourceLimits(t *testing.T) {
	g := NewWithT(t)
	l := newSourceLimits(1, 3)
	for i := 0; i < 3; i++ {
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
