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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/gitrepo"
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

func createGitRepo(ns, name string, spec fleet.GitRepoSpec) *fleet.GitRepo {
	gr := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	Expect(k8s.Create(ctx, gr)).To(Succeed())
	return gr
}

func updateSpec(ns, name string, mutate func(*fleet.GitRepoSpec)) {
	Eventually(func() error {
		gr := getGitRepo(ns, name)()
		mutate(&gr.Spec)
		return k8s.Update(ctx, gr)
	}, eventually, poll).Should(Succeed())
}

// warnings returns the notes of the Warning events about a GitRepo with a
// reason.
func warnings(ns, name, reason string) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
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

var _ = Describe("GitRepo", func() {
	It("turns bundle directories into Bundles and follows new commits by polling", func() {
		ns := newNamespace()
		repo, first := newGitRepo(ns+"-poll", merge(appFiles("one", "1"), appFiles("two", "2"), map[string]string{"README.md": "not a bundle"}))
		createGitRepo(ns, "demo", fleet.GitRepoSpec{Repo: repo.Dir, Paths: []string{"apps"}, PollingInterval: every(time.Second)})

		By("creating one Bundle per directory, labelled with repo and commit")
		Eventually(bundleCommits(ns, "demo"), eventually, poll).Should(Equal(map[string]string{
			"demo-apps-one": first, "demo-apps-two": first,
		}))
		b := bundles(ns, "demo")["demo-apps-one"]
		Expect(b.Spec.DefaultNamespace).To(Equal("one"))
		Expect(b.OwnerReferences).To(ContainElement(HaveField("Name", "demo")))
		Eventually(getGitRepo(ns, "demo"), eventually, poll).Should(And(
			HaveField("Status.Commit", first),
			HaveField("Finalizers", ContainElement(fleet.GitRepoFinalizer)),
			condition(fleet.ConditionAccepted, metav1.ConditionTrue, first[:12]),
			condition(fleet.ConditionGitPolling, metav1.ConditionTrue, first),
			condition(fleet.ConditionReady, metav1.ConditionTrue, ""),
		))

		By("picking up a new commit within the polling interval")
		unchanged := bundles(ns, "demo")["demo-apps-two"].ResourceVersion
		second := commit(repo, appFiles("one", "changed"))
		Eventually(bundleCommits(ns, "demo"), eventually, poll).Should(Equal(map[string]string{
			"demo-apps-one": second, "demo-apps-two": second,
		}))
		Expect(bundles(ns, "demo")["demo-apps-one"].Spec.Resources).To(ContainElement(HaveField("Content", ContainSubstring("changed"))))
		Eventually(getGitRepo(ns, "demo"), eventually, poll).Should(HaveField("Status.Commit", second))
		Expect(bundles(ns, "demo")["demo-apps-two"].ResourceVersion).NotTo(Equal(unchanged), "the commit label changed")

		By("deleting the Bundle of a removed directory")
		third := commit(repo, nil, "apps/two")
		Eventually(bundleCommits(ns, "demo"), eventually, poll).Should(Equal(map[string]string{"demo-apps-one": third}))

		By("writing nothing while the commit and spec stay the same")
		rv := bundles(ns, "demo")["demo-apps-one"].ResourceVersion
		Consistently(func() string { return bundles(ns, "demo")["demo-apps-one"].ResourceVersion }, 2500*time.Millisecond, 250*time.Millisecond).Should(Equal(rv))

		By("copying a bumped forceSyncGeneration and pausing into the Bundles")
		updateSpec(ns, "demo", func(s *fleet.GitRepoSpec) { s.ForceSyncGeneration = 7; s.Paused = true })
		Eventually(func() fleet.BundleSpec { return bundles(ns, "demo")["demo-apps-one"].Spec }, eventually, poll).Should(And(
			HaveField("ForceSyncGeneration", BeEquivalentTo(7)),
			HaveField("Paused", BeTrue()),
		))
		Eventually(getGitRepo(ns, "demo"), eventually, poll).Should(HaveField("Status.ObservedGeneration", BeEquivalentTo(getGitRepo(ns, "demo")().Generation)))

		By("deleting every Bundle with the GitRepo")
		Expect(k8s.Delete(ctx, getGitRepo(ns, "demo")())).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, &fleet.GitRepo{}))
		}, eventually, poll).Should(BeTrue())
		Expect(bundles(ns, "demo")).To(BeEmpty())
	})

	It("keeps the Bundles of the last good commit when git or fleet.yaml is broken", func() {
		ns := newNamespace()
		repo, first := newGitRepo(ns+"-errors", appFiles("one", "1"))
		createGitRepo(ns, "keep", fleet.GitRepoSpec{Repo: repo.Dir, PollingInterval: every(time.Second)})
		good := map[string]string{"keep-apps-one": first}
		Eventually(bundleCommits(ns, "keep"), eventually, poll).Should(Equal(good))

		By("reporting a malformed fleet.yaml with file and line")
		commit(repo, map[string]string{"apps/one/fleet.yaml": "defaultNamespace: one\nnotAField: true\n"})
		Eventually(getGitRepo(ns, "keep"), eventually, poll).Should(And(
			condition(fleet.ConditionAccepted, metav1.ConditionFalse, "apps/one/fleet.yaml: line 2"),
			condition(fleet.ConditionReady, metav1.ConditionFalse, "notAField"),
			condition(fleet.ConditionGitPolling, metav1.ConditionTrue, ""),
			HaveField("Status.Commit", first),
			HaveField("Status.Display.Error", BeTrue()),
		))
		Consistently(bundleCommits(ns, "keep"), 2*time.Second, 250*time.Millisecond).Should(Equal(good))
		Eventually(warnings(ns, "keep", fleet.ReasonInvalidBundle), eventually, poll).Should(
			ContainElement(ContainSubstring("apps/one/fleet.yaml: line 2")), "a Warning event for the malformed fleet.yaml")

		By("recovering when the fix is pushed")
		fixed := commit(repo, map[string]string{"apps/one/fleet.yaml": "defaultNamespace: one\n"})
		Eventually(bundleCommits(ns, "keep"), eventually, poll).Should(Equal(map[string]string{"keep-apps-one": fixed}))
		Eventually(getGitRepo(ns, "keep"), eventually, poll).Should(condition(fleet.ConditionAccepted, metav1.ConditionTrue, ""))
		good = map[string]string{"keep-apps-one": fixed}

		By("reporting a branch that does not exist")
		updateSpec(ns, "keep", func(s *fleet.GitRepoSpec) { s.Branch = "nope" })
		Eventually(getGitRepo(ns, "keep"), eventually, poll).Should(And(
			condition(fleet.ConditionAccepted, metav1.ConditionFalse, "branch nope not found in "+repo.Dir),
			condition(fleet.ConditionGitPolling, metav1.ConditionFalse, "branch nope not found"),
			condition(fleet.ConditionReady, metav1.ConditionFalse, "branch nope not found"),
		))
		Eventually(warnings(ns, "keep", fleet.ReasonBranchNotFound), eventually, poll).ShouldNot(BeEmpty(), "a Warning event for the missing branch")
		Consistently(bundleCommits(ns, "keep"), 2*time.Second, 250*time.Millisecond).Should(Equal(good))

		By("reporting an unreachable repository")
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		unreachable := "http://" + l.Addr().String() + "/repo"
		Expect(l.Close()).To(Succeed())
		updateSpec(ns, "keep", func(s *fleet.GitRepoSpec) { s.Branch = ""; s.Repo = unreachable })
		Eventually(getGitRepo(ns, "keep"), eventually, poll).Should(And(
			condition(fleet.ConditionGitPolling, metav1.ConditionFalse, unreachable),
			condition(fleet.ConditionReady, metav1.ConditionFalse, unreachable),
		))
		Consistently(bundleCommits(ns, "keep"), 2*time.Second, 250*time.Millisecond).Should(Equal(good))

		By("reporting a missing client secret")
		updateSpec(ns, "keep", func(s *fleet.GitRepoSpec) { s.Repo = repo.Dir; s.ClientSecretName = "missing" })
		Eventually(getGitRepo(ns, "keep"), eventually, poll).Should(
			condition(fleet.ConditionAccepted, metav1.ConditionFalse, "clientSecretName: Secret missing not found"))
		Expect(bundleCommits(ns, "keep")()).To(Equal(good))
	})

	It("fetches over HTTP with credentials and syncs at once when a signed webhook arrives", func() {
		ns := newNamespace()
		name := ns + "-hook"
		repo, first := newGitRepo(name, appFiles("web", "1"))
		Expect(k8s.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"},
			Data:       map[string][]byte{gitrepo.WebhookSecretKey: []byte("s3cret")},
		})).To(Succeed())
		url := gitServer.RepoURL(name)
		createGitRepo(ns, "hooked", fleet.GitRepoSpec{Repo: url + ".git", PollingInterval: every(time.Hour), WebhookSecret: "hook"})
		createGitRepo(ns, "other-branch", fleet.GitRepoSpec{Repo: url, Branch: "dev", PollingInterval: every(time.Hour)})
		Eventually(bundleCommits(ns, "hooked"), eventually, poll).Should(Equal(map[string]string{"hooked-apps-web": first}))

		second := commit(repo, appFiles("web", "2"))
		payload, err := json.Marshal(map[string]any{
			"ref": "refs/heads/main", "after": second,
			"repository": map[string]any{"clone_url": url + ".git", "html_url": url, "default_branch": "main"},
		})
		Expect(err).NotTo(HaveOccurred())
		call := func(signature string) (int, gitrepo.WebhookResponse) {
			req, err := http.NewRequest(http.MethodPost, webhookURL, bytes.NewReader(payload))
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("X-GitHub-Event", "push")
			req.Header.Set("Content-Type", "application/json")
			if signature != "" {
				req.Header.Set("X-Hub-Signature-256", signature)
			}
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			Expect(err).NotTo(HaveOccurred())
			var out gitrepo.WebhookResponse
			Expect(json.Unmarshal(body, &out)).To(Succeed(), string(body))
			return resp.StatusCode, out
		}
		mac := hmac.New(sha256.New, []byte("s3cret"))
		mac.Write(payload)
		valid := "sha256=" + hex.EncodeToString(mac.Sum(nil))

		By("rejecting a bad signature with 401")
		code, resp := call("sha256=" + hex.EncodeToString(make([]byte, 32)))
		Expect(code).To(Equal(http.StatusUnauthorized))
		Expect(resp.Message).To(ContainSubstring("signature verification failed"))
		Expect(resp.Rejected).To(ConsistOf(ContainSubstring(ns + "/hooked: X-Hub-Signature-256 does not match")))
		code, _ = call("")
		Expect(code).To(Equal(http.StatusUnauthorized))
		Consistently(bundleCommits(ns, "hooked"), time.Second, 200*time.Millisecond).Should(Equal(map[string]string{"hooked-apps-web": first}))
		Expect(getGitRepo(ns, "hooked")().Status.WebhookCommit).To(BeEmpty())

		By("syncing within about a second of a valid call, despite an hour's polling interval")
		code, resp = call(valid)
		Expect(code).To(Equal(http.StatusOK))
		Expect(resp.Triggered).To(Equal([]string{ns + "/hooked"}), "the GitRepo on another branch is not triggered")
		Eventually(bundleCommits(ns, "hooked"), 3*time.Second, 50*time.Millisecond).Should(Equal(map[string]string{"hooked-apps-web": second}))
		Eventually(getGitRepo(ns, "hooked"), eventually, poll).Should(And(
			HaveField("Status.Commit", second),
			HaveField("Status.WebhookCommit", second),
		))

		By("authenticating to the git server with the clientSecretName Secret")
		gitServer.SetBasicAuth("git", "pa55")
		DeferCleanup(gitServer.SetBasicAuth, "", "")
		Expect(k8s.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
			Type:       corev1.SecretTypeBasicAuth,
			Data:       map[string][]byte{"username": []byte("git"), "password": []byte("wrong")},
		})).To(Succeed())
		createGitRepo(ns, "private", fleet.GitRepoSpec{Repo: url, ClientSecretName: "creds", PollingInterval: every(time.Second)})
		Eventually(getGitRepo(ns, "private"), eventually, poll).Should(
			condition(fleet.ConditionAccepted, metav1.ConditionFalse, "authentication failed for "+url+": check clientSecretName"))
		Eventually(func() error {
			s := &corev1.Secret{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "creds"}, s); err != nil {
				return err
			}
			s.Data["password"] = []byte("pa55")
			return k8s.Update(ctx, s)
		}, eventually, poll).Should(Succeed())
		Eventually(bundleCommits(ns, "private"), eventually, poll).Should(Equal(map[string]string{"private-apps-web": second}))
	})
})
