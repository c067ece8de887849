package gitrepo_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/gitrepo"
	"github.com/gitfleet/fleet/controllers/gitrepo/webhook"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/secretmeta"
	"github.com/gitfleet/fleet/test/envtest"
)

var (
	ctx        = context.Background()
	env        *envtest.Environment
	gitRoot    string
	gitServer  *gittest.Server
	webhookURL string
)

// TestMain runs this package's tests against one control plane, with only
// the GitRepo reconciler running, as the manager runs it, and its webhook
// handler served on loopback.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	gitRoot, err = os.MkdirTemp("", "gitrepo-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(gitRoot)
	gitServer = gittest.NewServer(gitRoot)
	defer gitServer.Close()

	var webhookSrv *httptest.Server
	defer func() {
		if webhookSrv != nil {
			webhookSrv.Close()
		}
	}()
	return envtest.Run(ctx, envtest.RunInput{
		M:    m,
		Name: "gitrepo",
		SetupReconcilers: func(_ context.Context, mgr ctrl.Manager) error {
			// As the manager runs it: an unchanged Secret is not read again.
			secrets, err := secretmeta.ForManager(mgr)
			if err != nil {
				return err
			}
			r := &gitrepo.Reconciler{Client: mgr.GetClient(), SecretVersions: secrets, CacheDir: filepath.Join(gitRoot, ".cache"), Workers: 4, AllowLocalRepos: true,
				// The test git servers listen on loopback.
				Egress: egress.AllowLoopback()}
			webhookSrv = httptest.NewServer(webhook.NewHandler(mgr.GetClient(), webhook.Options{SecretReader: mgr.GetAPIReader()}))
			webhookURL = webhookSrv.URL
			return r.SetupWithManager(mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	})
}

// newNamespace creates a namespace for one test, whose GitRepos are deleted
// when it ends (no namespace controller runs).
func newNamespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ns, err := env.CreateNamespace(ctx, "gitrepo")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { deleteGitRepos(t, ns.Name) })
	return ns.Name
}

// deleteGitRepos deletes the GitRepos of a namespace and waits until their
// finalizers let them go.
func deleteGitRepos(t *testing.T, ns string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(env.DeleteAllOf(ctx, &fleet.GitRepo{}, client.InNamespace(ns))).To(Succeed())
	g.Eventually(func() []fleet.GitRepo {
		list := &fleet.GitRepoList{}
		g.Expect(env.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		return list.Items
	}).WithTimeout(eventually).WithPolling(poll).Should(BeEmpty(), "the GitRepos of %s gone", ns)
}

// newGitRepo creates a repository (served over HTTP as gitServer.RepoURL(name)
// and on disk at its Dir) with a first commit of files.
func newGitRepo(g *WithT, name string, files map[string]string) (*gittest.Repo, string) {
	repo, err := gittest.NewRepo(filepath.Join(gitRoot, name), "main")
	g.Expect(err).NotTo(HaveOccurred())
	return repo, commit(g, repo, files)
}

func commit(g *WithT, repo *gittest.Repo, files map[string]string, remove ...string) string {
	sha, err := repo.Commit("test", files, remove...)
	g.Expect(err).NotTo(HaveOccurred())
	return sha
}

// bundles returns the Bundles of a GitRepo by name.
func bundles(g Gomega, ns, repo string) map[string]fleet.Bundle {
	list := &fleet.BundleList{}
	g.Expect(env.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{fleet.RepoLabel: repo})).To(Succeed())
	out := map[string]fleet.Bundle{}
	for _, b := range list.Items {
		out[b.Name] = b
	}
	return out
}

func bundleCommits(g Gomega, ns, repo string) func() map[string]string {
	return func() map[string]string {
		out := map[string]string{}
		for name, b := range bundles(g, ns, repo) {
			out[name] = b.Labels[fleet.CommitLabel]
		}
		return out
	}
}

func getGitRepo(g Gomega, ns, name string) func() *fleet.GitRepo {
	return func() *fleet.GitRepo {
		gr := &fleet.GitRepo{}
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, gr)).To(Succeed())
		return gr
	}
}

// condition matches a GitRepo whose condition t has the status and a message
// containing msg.
func condition(t string, status metav1.ConditionStatus, msg string) OmegaMatcher {
	return WithTransform(func(gr *fleet.GitRepo) metav1.Condition {
		for _, c := range gr.Status.Conditions {
			if c.Type == t {
				return c
			}
		}
		return metav1.Condition{}
	}, And(
		HaveField("Status", status),
		HaveField("Message", ContainSubstring(msg)),
	))
}

const (
	eventually = 20 * time.Second
	poll       = 100 * time.Millisecond
)
