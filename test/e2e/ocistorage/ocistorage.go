package ocistorage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/chartrepo"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// SpecInput is what OCIStorageSpec runs against.
type SpecInput struct {
	// Upstream is the manager's control plane, the manager running on it.
	Upstream *controlplane.ControlPlane
	// Downstreams are two bare control planes that join it: dev and prod.
	Downstreams []*controlplane.ControlPlane
	// Admin is an admin client of Upstream, with the manager's scheme.
	Admin client.Client
	// LogDir receives the agents' logs.
	LogDir string
}

const ws = fleet.DefaultWorkspace

// largeBlob is the data of each of the large bundle's three ConfigMaps.
const largeBlob = 700 << 10

// OCIStorageSpec joins two clusters, dev and prod, and deploys two
// GitRepos through a registry that scopes each user to repository
// prefixes: "team-a" (the namespace-wide ocistorage Secret, prefix team-a,
// agent user reader-a) to dev, and "team-b" (its own ociRegistrySecret,
// prefix team-b, agent user reader-b) to prod. Call it in an Ordered
// container.
func OCIStorageSpec(ctx context.Context, inputGetter func() SpecInput) {
	var (
		admin     client.Client
		dev, prod *e2e.JoinedCluster
		reg       *chartrepo.AuthRegistry
		git       *gittest.Server
	)
	BeforeAll(func() {
		in := inputGetter()
		Expect(in.Downstreams).To(HaveLen(2), "OCIStorageSpec needs two downstream control planes")
		admin = in.Admin
		join := func(cp *controlplane.ControlPlane, env string) *e2e.JoinedCluster {
			return e2e.Join(ctx, e2e.JoinInput{Upstream: in.Upstream, Downstream: cp, Admin: admin, LogDir: in.LogDir,
				AgentArgs:  []string{"--checkin-interval", "5s", "--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "30s"},
				ConfigArgs: []string{"-l", "env=" + env}}, 90*time.Second)
		}
		dev, prod = join(in.Downstreams[0], "dev"), join(in.Downstreams[1], "prod")
		DeferCleanup(func() { dev.StopAgents(); prod.StopAgents() })

		reg = chartrepo.NewAuthRegistry(map[string]chartrepo.Access{
			"pusher":   {Password: "push-pw", Push: true, Prefixes: []string{"team-a", "team-b"}},
			"reader-a": {Password: "read-a", Prefixes: []string{"team-a"}},
			"reader-b": {Password: "read-b", Prefixes: []string{"team-b"}},
		})
		DeferCleanup(reg.Close)

		root, err := os.MkdirTemp("", "fleet-e2e-ocistorage-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, root)
		for _, team := range []string{"team-a", "team-b"} {
			repo, err := gittest.NewRepo(filepath.Join(root, team), "main")
			Expect(err).NotTo(HaveOccurred())
			// A ConfigMap with 200 KiB of data: a content etcd would hold
			// once in a Content, and the agent now pulls from the registry.
			_, err = repo.Commit("config", map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + team +
				"\n  namespace: default\ndata:\n  team: " + team + "\n  blob: " + strings.Repeat("x", 200<<10) + "\n"})
			Expect(err).NotTo(HaveOccurred())
		}
		// A bundle over etcd's 1.5 MiB: three ConfigMaps of 700 KiB, the
		// case OCI storage exists for.
		large, err := gittest.NewRepo(filepath.Join(root, "large"), "main")
		Expect(err).NotTo(HaveOccurred())
		files := map[string]string{}
		for i := range 3 {
			files[fmt.Sprintf("cm%d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: large-%d\n  namespace: default\ndata:\n  blob: %s\n",
				i, strings.Repeat("y", largeBlob))
		}
		_, err = large.Commit("large", files)
		Expect(err).NotTo(HaveOccurred())
		git = gittest.NewServer(root)
		DeferCleanup(git.Close)
	})

	storageSecret := func(name, prefix, reader, readerPW string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws}, Type: fleet.OCIStorageSecretType,
			StringData: map[string]string{"reference": reg.Host() + "/" + prefix, "username": "pusher", "password": "push-pw",
				"agentUsername": reader, "agentPassword": readerPW, "basicHTTP": "true"}}
	}
	gitRepo := func(name, env, secret string) *fleet.GitRepo {
		return &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws},
			Spec: fleet.GitRepoSpec{Repo: git.RepoURL(strings.TrimSuffix(name, "-etcd")), Branch: "main", OCIRegistrySecret: secret,
				PollingInterval: &metav1.Duration{Duration: 2 * time.Second},
				Targets:         []fleet.GitTarget{{Name: env, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": env}}}}}}
	}
	bdOf := func(j *e2e.JoinedCluster, bundle string) *fleet.BundleDeployment {
		bd := &fleet.BundleDeployment{}
		err := admin.Get(ctx, types.NamespacedName{Namespace: j.Cred.ClusterNamespace, Name: bundle}, bd)
		if apierrors.IsNotFound(err) {
			return nil
		}
		Expect(err).NotTo(HaveOccurred())
		return bd
	}
	waitReady := func(j *e2e.JoinedCluster, bundle string) *fleet.BundleDeployment {
		GinkgoHelper()
		var bd *fleet.BundleDeployment
		e2e.WaitFor("BundleDeployment "+bundle+" Ready on "+j.Downstream.Name, func(g Gomega) {
			bd = bdOf(j, bundle)
			g.Expect(bd).NotTo(BeNil())
			g.Expect(summary.State(bd)).To(Equal(fleet.Ready), "%s: %s\nagent log:\n%s", bundle, summary.Message(bd), j.Agent.Tail(4000))
		}, 3*time.Minute, 250*time.Millisecond)
		return bd
	}

	It("pushes each GitRepo's content to its registry, not etcd, and each cluster's agent pulls it by digest with its own credential", func() {
		Expect(admin.Create(ctx, storageSecret(fleet.OCIStorageDefaultSecretName, "team-a", "reader-a", "read-a"))).To(Succeed())
		Expect(admin.Create(ctx, storageSecret("storage-b", "team-b", "reader-b", "read-b"))).To(Succeed())
		a, b := gitRepo("team-a", "dev", ""), gitRepo("team-b", "prod", "storage-b")
		Expect(admin.Create(ctx, a)).To(Succeed())
		Expect(admin.Create(ctx, b)).To(Succeed())
		DeferCleanup(func() {
			for _, gr := range []*fleet.GitRepo{a, b} {
				Expect(client.IgnoreNotFound(admin.Delete(ctx, gr))).To(Succeed())
			}
		})

		bdA, bdB := waitReady(dev, "team-a"), waitReady(prod, "team-b")
		for _, j := range []*e2e.JoinedCluster{dev, prod} {
			team := map[*e2e.JoinedCluster]string{dev: "team-a", prod: "team-b"}[j]
			cm := &corev1.ConfigMap{}
			Expect(j.Local.Get(ctx, types.NamespacedName{Namespace: "default", Name: team}, cm)).To(Succeed())
			Expect(cm.Data).To(HaveKeyWithValue("team", team))
			Expect(cm.Data["blob"]).To(HaveLen(200 << 10))
		}
		Expect(bdOf(dev, "team-b")).To(BeNil(), "team-b targets prod only")
		Expect(bdOf(prod, "team-a")).To(BeNil(), "team-a targets dev only")

		By("the Bundle holds only the contentsId, the BundleDeployment says ociContents, and no Content exists")
		for name, bd := range map[string]*fleet.BundleDeployment{"team-a": bdA, "team-b": bdB} {
			bundle := &fleet.Bundle{}
			Expect(admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: name}, bundle)).To(Succeed())
			Expect(bundle.Spec.Resources).To(BeEmpty())
			Expect(bundle.Spec.ContentsID).To(HavePrefix("s-"))
			Expect(bd.Spec.OCIContents).To(BeTrue())
			Expect(bd.Spec.DeploymentID).To(HavePrefix(bundle.Spec.ContentsID + ":"))
			err := admin.Get(ctx, types.NamespacedName{Name: bundle.Spec.ContentsID}, &fleet.Content{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Content %s: %v", bundle.Spec.ContentsID, err)
		}
		// The bundle reader compresses the repetitive blob: the manifests are
		// small, but they came from the registry.
		Expect(reg.BlobBytesServed()).To(BeNumerically(">", 0), "the agents pulled their content from the registry")

		By("each cluster namespace holds only the agent's read-only credential for its own registry prefix")
		secA := &corev1.Secret{}
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(bdA), secA)).To(Succeed())
		Expect(string(secA.Data["username"])).To(Equal("reader-a"))
		Expect(secA.Data).NotTo(HaveKey("agentPassword"))
		Expect(string(secA.Data["password"])).NotTo(Equal("push-pw"))
		Expect(secA.OwnerReferences).To(ConsistOf(HaveField("UID", bdA.UID)))

		By("dev's credential cannot pull prod's content, even with its digest: the registry refuses it")
		optsA, err := ocistorage.FromSecret(secA)
		Expect(err).NotTo(HaveOccurred())
		idB, _, _ := strings.Cut(bdB.Spec.DeploymentID, ":")
		refusedBefore := reg.Refused("reader-a")
		optsA.Reference = reg.Host() + "/team-b"
		_, err = optsA.Pull(ctx, nil, idB, 64<<20)
		Expect(err).To(HaveOccurred(), "reader-a reading team-b's repository")
		Expect(reg.Refused("reader-a")).To(BeNumerically(">", refusedBefore))
		optsA.Reference = reg.Host() + "/team-a"
		_, err = optsA.Pull(ctx, nil, idB, 64<<20)
		Expect(err).To(HaveOccurred(), "team-b's blob through team-a's repositories")
	})

	It("deploys a bundle over etcd's 1.5 MiB through the registry, and refuses it without one, saying so", func() {
		// The namespace-wide ocistorage Secret of the spec above serves
		// "large"; "large-etcd", in a namespace without a registry, would
		// land in etcd.
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: fleet.OCIStorageDefaultSecretName}, &corev1.Secret{})).To(Succeed())
		gr := gitRepo("large", "dev", "")
		Expect(admin.Create(ctx, gr)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(admin.Delete(ctx, gr))).To(Succeed()) })
		plain := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "no-registry"}}
		Expect(admin.Create(ctx, plain)).To(Succeed())
		inEtcd := gitRepo("large-etcd", "dev", "")
		inEtcd.Namespace = plain.Name
		Expect(admin.Create(ctx, inEtcd)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(admin.Delete(ctx, inEtcd))).To(Succeed()) })

		pulled := reg.BlobBytesServed()
		waitReady(dev, "large")
		for i := range 3 {
			cm := &corev1.ConfigMap{}
			Expect(dev.Local.Get(ctx, types.NamespacedName{Namespace: "default", Name: fmt.Sprintf("large-%d", i)}, cm)).To(Succeed())
			Expect(cm.Data["blob"]).To(HaveLen(largeBlob))
		}
		bundle := &fleet.Bundle{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: "large"}, bundle)).To(Succeed())
		Expect(bundle.Spec.Resources).To(BeEmpty())
		Expect(bundle.Spec.ContentsID).To(HavePrefix("s-"))
		// The layer is gzipped: 2.1 MiB of repetitive files come as a few KiB.
		Expect(reg.BlobBytesServed() - pulled).To(BeNumerically("<", 3*largeBlob/10))

		e2e.WaitFor("GitRepo large-etcd refused as too large", func(g Gomega) {
			got := &fleet.GitRepo{}
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(inEtcd), got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, fleet.ConditionAccepted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(And(ContainSubstring("bundle too large for the API server's request limit"),
				ContainSubstring("ociRegistrySecret")))
		}, time.Minute, 250*time.Millisecond)
	})
}
