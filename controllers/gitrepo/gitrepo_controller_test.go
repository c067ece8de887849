package gitrepo_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/gitrepo/webhook"
)

const configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
data:
  key: %s
`

func appFiles(app, value string) map[string]string {
	return map[string]string{
		"apps/" + app + "/fleet.yaml": "defaultNamespace: " + app + "\n",
		"apps/" + app + "/cm.yaml":    fmt.Sprintf(configMap, app, value),
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func createGitRepo(g *WithT, ns, name string, spec fleet.GitRepoSpec) {
	gr := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	g.Expect(env.CreateAndWait(ctx, gr)).To(Succeed())
}

func updateSpec(g *WithT, ns, name string, mutate func(*fleet.GitRepoSpec)) {
	g.Eventually(func() error {
		gr := getGitRepo(g, ns, name)()
		mutate(&gr.Spec)
		return env.Update(ctx, gr)
	}, eventually, poll).Should(Succeed())
}

// warnings returns the notes of the Warning events about a GitRepo with a
// reason.
func warnings(g *WithT, ns, name, reason string) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		g.Expect(env.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "GitRepo" && e.Regarding.Name == name && e.Type == corev1.EventTypeWarning && e.Reason == reason {
				out = append(out, e.Note)
			}
		}
		return out
	}
}

func every(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// TestSyncFollowsNewCommitsByPolling: the controller turns bundle directories into Bundles and follows new commits by polling.
func TestSyncFollowsNewCommitsByPolling(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo, first := newGitRepo(g, ns+"-poll", merge(appFiles("one", "1"), appFiles("two", "2"), map[string]string{"README.md": "not a bundle"}))
	createGitRepo(g, ns, "demo", fleet.GitRepoSpec{Repo: repo.Dir, Paths: []string{"apps"}, PollingInterval: every(time.Second)})

	t.Log("creating one Bundle per directory, labelled with repo and commit")
	g.Eventually(bundleCommits(g, ns, "demo"), eventually, poll).Should(Equal(map[string]string{
		"demo-apps-one": first, "demo-apps-two": first,
	}))
	b := bundles(g, ns, "demo")["demo-apps-one"]
	g.Expect(b.Spec.DefaultNamespace).To(Equal("one"))
	g.Expect(b.OwnerReferences).To(ContainElement(HaveField("Name", "demo")))
	g.Eventually(getGitRepo(g, ns, "demo"), eventually, poll).Should(And(
		HaveField("Status.Commit", first),
		HaveField("Finalizers", ContainElement(fleet.GitRepoFinalizer)),
		condition(fleet.ConditionAccepted, metav1.ConditionTrue, first[:12]),
		condition(fleet.ConditionGitPolling, metav1.ConditionTrue, first),
		condition(fleet.ConditionReady, metav1.ConditionTrue, ""),
	))

	t.Log("picking up a new commit within the polling interval")
	unchanged := bundles(g, ns, "demo")["demo-apps-two"].ResourceVersion
	second := commit(g, repo, appFiles("one", "changed"))
	g.Eventually(bundleCommits(g, ns, "demo"), eventually, poll).Should(Equal(map[string]string{
		"demo-apps-one": second, "demo-apps-two": second,
	}))
	g.Expect(bundles(g, ns, "demo")["demo-apps-one"].Spec.Resources).To(ContainElement(HaveField("Content", ContainSubstring("changed"))))
	g.Eventually(getGitRepo(g, ns, "demo"), eventually, poll).Should(HaveField("Status.Commit", second))
	g.Expect(bundles(g, ns, "demo")["demo-apps-two"].ResourceVersion).NotTo(Equal(unchanged), "the commit label changed")

	t.Log("deleting the Bundle of a removed directory")
	third := commit(g, repo, nil, "apps/two")
	g.Eventually(bundleCommits(g, ns, "demo"), eventually, poll).Should(Equal(map[string]string{"demo-apps-one": third}))

	t.Log("writing nothing while the commit and spec stay the same")
	rv := bundles(g, ns, "demo")["demo-apps-one"].ResourceVersion
	g.Consistently(func() string { return bundles(g, ns, "demo")["demo-apps-one"].ResourceVersion }, 2500*time.Millisecond, 250*time.Millisecond).Should(Equal(rv))

	t.Log("copying a bumped forceSyncGeneration and pausing into the Bundles")
	updateSpec(g, ns, "demo", func(s *fleet.GitRepoSpec) { s.ForceSyncGeneration = 7; s.Paused = true })
	g.Eventually(func() fleet.BundleSpec { return bundles(g, ns, "demo")["demo-apps-one"].Spec }, eventually, poll).Should(And(
		HaveField("ForceSyncGeneration", BeEquivalentTo(7)),
		HaveField("Paused", BeTrue()),
	))
	g.Eventually(getGitRepo(g, ns, "demo"), eventually, poll).Should(HaveField("Status.ObservedGeneration", BeEquivalentTo(getGitRepo(g, ns, "demo")().Generation)))

	t.Log("deleting every Bundle with the GitRepo")
	g.Expect(env.Delete(ctx, getGitRepo(g, ns, "demo")())).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, &fleet.GitRepo{}))
	}, eventually, poll).Should(BeTrue())
	g.Expect(bundles(g, ns, "demo")).To(BeEmpty())
}

// TestKeepsTheLastGoodBundlesOnErrors: the controller keeps the Bundles of the last good commit when git or fleet.yaml is broken.
func TestKeepsTheLastGoodBundlesOnErrors(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo, first := newGitRepo(g, ns+"-errors", appFiles("one", "1"))
	createGitRepo(g, ns, "keep", fleet.GitRepoSpec{Repo: repo.Dir, PollingInterval: every(time.Second)})
	good := map[string]string{"keep-apps-one": first}
	g.Eventually(bundleCommits(g, ns, "keep"), eventually, poll).Should(Equal(good))

	t.Log("reporting a malformed fleet.yaml with file and line")
	commit(g, repo, map[string]string{"apps/one/fleet.yaml": "defaultNamespace: one\nkeepResources: sometimes\n"})
	g.Eventually(getGitRepo(g, ns, "keep"), eventually, poll).Should(And(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, "apps/one/fleet.yaml: line 2"),
		condition(fleet.ConditionReady, metav1.ConditionFalse, "keepResources"),
		condition(fleet.ConditionGitPolling, metav1.ConditionTrue, ""),
		HaveField("Status.Commit", first),
		HaveField("Status.Display.Error", BeTrue()),
	))
	g.Consistently(bundleCommits(g, ns, "keep"), 2*time.Second, 250*time.Millisecond).Should(Equal(good))
	g.Eventually(warnings(g, ns, "keep", fleet.ReasonInvalidBundle), eventually, poll).Should(
		ContainElement(ContainSubstring("apps/one/fleet.yaml: line 2")), "a Warning event for the malformed fleet.yaml")

	t.Log("recovering when the fix is pushed")
	fixed := commit(g, repo, map[string]string{"apps/one/fleet.yaml": "defaultNamespace: one\n"})
	g.Eventually(bundleCommits(g, ns, "keep"), eventually, poll).Should(Equal(map[string]string{"keep-apps-one": fixed}))
	g.Eventually(getGitRepo(g, ns, "keep"), eventually, poll).Should(condition(fleet.ConditionAccepted, metav1.ConditionTrue, ""))
	good = map[string]string{"keep-apps-one": fixed}

	t.Log("reporting a branch that does not exist")
	updateSpec(g, ns, "keep", func(s *fleet.GitRepoSpec) { s.Branch = "nope" })
	g.Eventually(getGitRepo(g, ns, "keep"), eventually, poll).Should(And(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, "branch nope not found in "+repo.Dir),
		condition(fleet.ConditionGitPolling, metav1.ConditionFalse, "branch nope not found"),
		condition(fleet.ConditionReady, metav1.ConditionFalse, "branch nope not found"),
	))
	g.Eventually(warnings(g, ns, "keep", fleet.ReasonBranchNotFound), eventually, poll).ShouldNot(BeEmpty(), "a Warning event for the missing branch")
	g.Consistently(bundleCommits(g, ns, "keep"), 2*time.Second, 250*time.Millisecond).Should(Equal(good))

	t.Log("reporting an unreachable repository")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	unreachable := "http://" + l.Addr().String() + "/repo"
	g.Expect(l.Close()).To(Succeed())
	updateSpec(g, ns, "keep", func(s *fleet.GitRepoSpec) { s.Branch = ""; s.Repo = unreachable })
	g.Eventually(getGitRepo(g, ns, "keep"), eventually, poll).Should(And(
		condition(fleet.ConditionGitPolling, metav1.ConditionFalse, unreachable),
		condition(fleet.ConditionReady, metav1.ConditionFalse, unreachable),
	))
	g.Consistently(bundleCommits(g, ns, "keep"), 2*time.Second, 250*time.Millisecond).Should(Equal(good))

	t.Log("reporting a missing client secret")
	updateSpec(g, ns, "keep", func(s *fleet.GitRepoSpec) { s.Repo = repo.Dir; s.ClientSecretName = "missing" })
	g.Eventually(getGitRepo(g, ns, "keep"), eventually, poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, "clientSecretName: Secret missing not found"))
	g.Expect(bundleCommits(g, ns, "keep")()).To(Equal(good))
}

// TestWarnsAboutIgnoredFleetYAMLKeys: a fleet.yaml with a key that is
// ignored (unknown, or a Fleet field not implemented here) still deploys;
// the GitRepo stays Ready and Accepted and says so in a Warning condition,
// which goes away with a commit that removes the key.
func TestWarnsAboutIgnoredFleetYAMLKeys(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo, first := newGitRepo(g, ns+"-warn", merge(appFiles("two", "2"), map[string]string{
		"apps/one/fleet.yaml": "defaultNamespace: one\nnotAField: true\nimageScans:\n- {image: x, tagName: t}\n",
		"apps/one/cm.yaml":    fmt.Sprintf(configMap, "one", "1"),
	}))
	createGitRepo(g, ns, "lenient", fleet.GitRepoSpec{Repo: repo.Dir, Paths: []string{"apps"}, PollingInterval: every(time.Second)})

	t.Log("deploying the bundles and warning about the ignored keys")
	g.Eventually(bundleCommits(g, ns, "lenient"), eventually, poll).Should(Equal(map[string]string{
		"lenient-apps-one": first, "lenient-apps-two": first,
	}))
	g.Expect(bundles(g, ns, "lenient")["lenient-apps-one"].Spec.DefaultNamespace).To(Equal("one"))
	g.Eventually(getGitRepo(g, ns, "lenient"), eventually, poll).Should(And(
		condition(fleet.ConditionWarning, metav1.ConditionTrue,
			`2 fleet.yaml keys ignored: apps/one/fleet.yaml: line 2: unknown field "notAField" is ignored (a typo?); `+
				"apps/one/fleet.yaml: line 3: imageScans is not implemented here and is ignored"),
		HaveField("Status.Conditions", ContainElement(And(HaveField("Type", fleet.ConditionWarning), HaveField("Reason", fleet.ReasonIgnoredFields)))),
		condition(fleet.ConditionAccepted, metav1.ConditionTrue, first[:12]),
		condition(fleet.ConditionReady, metav1.ConditionTrue, ""),
		HaveField("Status.Display.Error", BeFalse()),
	))

	t.Log("clearing the warning when a commit removes the keys")
	second := commit(g, repo, map[string]string{"apps/one/fleet.yaml": "defaultNamespace: one\n"})
	g.Eventually(bundleCommits(g, ns, "lenient"), eventually, poll).Should(Equal(map[string]string{
		"lenient-apps-one": second, "lenient-apps-two": second,
	}))
	g.Eventually(func() []metav1.Condition { return getGitRepo(g, ns, "lenient")().Status.Conditions }, eventually, poll).ShouldNot(
		ContainElement(HaveField("Type", fleet.ConditionWarning)))
	g.Expect(getGitRepo(g, ns, "lenient")()).To(condition(fleet.ConditionReady, metav1.ConditionTrue, ""))
}

// TestCredentialsAndWebhook: the controller fetches over HTTP with credentials and syncs at once when a signed webhook arrives.
func TestCredentialsAndWebhook(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	name := ns + "-hook"
	repo, first := newGitRepo(g, name, appFiles("web", "1"))
	g.Expect(env.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"},
		Data:       map[string][]byte{webhook.SecretKey: []byte("s3cret")},
	})).To(Succeed())
	url := gitServer.RepoURL(name)
	createGitRepo(g, ns, "hooked", fleet.GitRepoSpec{Repo: url + ".git", PollingInterval: every(time.Hour), WebhookSecret: "hook"})
	createGitRepo(g, ns, "other-branch", fleet.GitRepoSpec{Repo: url, Branch: "dev", PollingInterval: every(time.Hour)})
	g.Eventually(bundleCommits(g, ns, "hooked"), eventually, poll).Should(Equal(map[string]string{"hooked-apps-web": first}))

	second := commit(g, repo, appFiles("web", "2"))
	payload, err := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "after": second,
		"repository": map[string]any{"clone_url": url + ".git", "html_url": url, "default_branch": "main"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	call := func(signature string) (int, webhook.Response) {
		req, err := http.NewRequest(http.MethodPost, webhookURL, bytes.NewReader(payload))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("Content-Type", "application/json")
		if signature != "" {
			req.Header.Set("X-Hub-Signature-256", signature)
		}
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		var out webhook.Response
		g.Expect(json.Unmarshal(body, &out)).To(Succeed(), string(body))
		return resp.StatusCode, out
	}
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write(payload)
	valid := "sha256=" + hex.EncodeToString(mac.Sum(nil))

	t.Log("rejecting a bad signature with 401")
	code, resp := call("sha256=" + hex.EncodeToString(make([]byte, 32)))
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	g.Expect(resp.Message).To(ContainSubstring("signature verification failed"))
	g.Expect(resp.Rejected).To(ConsistOf(ContainSubstring("X-Hub-Signature-256 does not match")))
	code, _ = call("")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	g.Consistently(bundleCommits(g, ns, "hooked"), time.Second, 200*time.Millisecond).Should(Equal(map[string]string{"hooked-apps-web": first}))
	g.Expect(getGitRepo(g, ns, "hooked")().Status.WebhookCommit).To(BeEmpty())

	t.Log("syncing at a valid call, despite an hour's polling interval")
	code, resp = call(valid)
	called := time.Now()
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(resp.Triggered).To(Equal(1), "the GitRepo on another branch is not triggered")
	// Well under the interval: the call, not a poll, brought the commit. It
	// takes a few hundred milliseconds (an ls-remote, a fetch, the Bundle's
	// update), longer on a loaded machine, where 3 s was too tight a bound.
	g.Eventually(bundleCommits(g, ns, "hooked"), eventually, 50*time.Millisecond).Should(Equal(map[string]string{"hooked-apps-web": second}))
	t.Logf("the webhook's commit was synced %s after the call", time.Since(called).Round(10*time.Millisecond))
	g.Eventually(getGitRepo(g, ns, "hooked"), eventually, poll).Should(And(
		HaveField("Status.Commit", second),
		HaveField("Status.WebhookCommit", second),
	))

	t.Log("authenticating to the git server with the clientSecretName Secret")
	gitServer.SetBasicAuth("git", "pa55")
	t.Cleanup(func() { gitServer.SetBasicAuth("", "") })
	g.Expect(env.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		Type:       corev1.SecretTypeBasicAuth,
		Data:       map[string][]byte{"username": []byte("git"), "password": []byte("wrong")},
	})).To(Succeed())
	createGitRepo(g, ns, "private", fleet.GitRepoSpec{Repo: url, ClientSecretName: "creds", PollingInterval: every(time.Second)})
	g.Eventually(getGitRepo(g, ns, "private"), eventually, poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, "authentication failed for "+url+": check clientSecretName"))
	g.Eventually(func() error {
		s := &corev1.Secret{}
		if err := env.Get(ctx, client.ObjectKey{Namespace: ns, Name: "creds"}, s); err != nil {
			return err
		}
		s.Data["password"] = []byte("pa55")
		return env.Update(ctx, s)
	}, eventually, poll).Should(Succeed())
	g.Eventually(bundleCommits(g, ns, "private"), eventually, poll).Should(Equal(map[string]string{"private-apps-web": second}))
}
