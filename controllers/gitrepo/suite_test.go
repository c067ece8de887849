package gitrepo_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/gitrepo"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/controlplane"
)

func TestGitRepoController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "GitRepo controller")
}

var (
	ctx         = context.Background()
	cp          *controlplane.ControlPlane
	k8s         client.Client
	stopManager context.CancelFunc
	managerDone chan error
	gitRoot     string
	gitServer   *gittest.Server
	webhookURL  string
	webhookSrv  *httptest.Server
)

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	Expect(fleet.AddToScheme(s)).To(Succeed())
	return s
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	var err error
	cp, err = controlplane.Start(controlplane.Options{Name: "gitrepo"})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = cp.Client(scheme())
	Expect(err).NotTo(HaveOccurred())

	gitRoot, err = os.MkdirTemp("", "gitrepo-test-")
	Expect(err).NotTo(HaveOccurred())
	gitServer = gittest.NewServer(gitRoot)

	// Only this package's reconciler runs, as the manager would run it.
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	r := &gitrepo.Reconciler{Client: mgr.GetClient(), CacheDir: filepath.Join(gitRoot, ".cache"), Workers: 4}
	Expect(r.SetupWithManager(mgr)).To(Succeed())
	webhookSrv = httptest.NewServer(gitrepo.NewWebhookHandler(mgr.GetClient(), gitrepo.WebhookOptions{SecretReader: mgr.GetAPIReader()}))
	webhookURL = webhookSrv.URL

	var mctx context.Context
	mctx, stopManager = context.WithCancel(ctx)
	managerDone = make(chan error, 1)
	go func() { managerDone <- mgr.Start(mctx) }()
	Expect(mgr.GetCache().WaitForCacheSync(mctx)).To(BeTrue())
})

var _ = AfterSuite(func() {
	if webhookSrv != nil {
		webhookSrv.Close()
	}
	if stopManager != nil {
		stopManager()
		<-managerDone
	}
	if gitServer != nil {
		gitServer.Close()
	}
	if cp != nil {
		_ = cp.Stop()
	}
	_ = os.RemoveAll(gitRoot)
})

var nsCount int

// newNamespace creates a namespace for one spec.
func newNamespace() string {
	nsCount++
	name := fmt.Sprintf("gitrepo-%d-%d", GinkgoParallelProcess(), nsCount)
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	DeferCleanup(deleteGitRepos, name)
	return name
}

// deleteGitRepos deletes the GitRepos of a namespace (no namespace
// controller runs) and waits until their finalizers let them go.
func deleteGitRepos(ns string) {
	Expect(k8s.DeleteAllOf(ctx, &fleet.GitRepo{}, client.InNamespace(ns))).To(Succeed())
	Eventually(func() []fleet.GitRepo {
		list := &fleet.GitRepoList{}
		Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		return list.Items
	}, eventually, poll).Should(BeEmpty())
}

// newGitRepo creates a repository (served over HTTP as gitServer.RepoURL(name)
// and on disk at its Dir) with a first commit of files.
func newGitRepo(name string, files map[string]string) (*gittest.Repo, string) {
	repo, err := gittest.NewRepo(filepath.Join(gitRoot, name), "main")
	Expect(err).NotTo(HaveOccurred())
	return repo, commit(repo, files)
}

func commit(repo *gittest.Repo, files map[string]string, remove ...string) string {
	sha, err := repo.Commit("test", files, remove...)
	Expect(err).NotTo(HaveOccurred())
	return sha
}

// bundles returns the Bundles of a GitRepo by name.
func bundles(ns, repo string) map[string]fleet.Bundle {
	list := &fleet.BundleList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{fleet.RepoLabel: repo})).To(Succeed())
	out := map[string]fleet.Bundle{}
	for _, b := range list.Items {
		out[b.Name] = b
	}
	return out
}

func bundleCommits(ns, repo string) func() map[string]string {
	return func() map[string]string {
		out := map[string]string{}
		for name, b := range bundles(ns, repo) {
			out[name] = b.Labels[fleet.CommitLabel]
		}
		return out
	}
}

func getGitRepo(ns, name string) func() *fleet.GitRepo {
	return func() *fleet.GitRepo {
		gr := &fleet.GitRepo{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, gr)).To(Succeed())
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
