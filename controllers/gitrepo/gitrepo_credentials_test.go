package gitrepo_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/config/knownhosts"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
)

// A GitRepo without clientSecretName takes its credentials from the
// gitcredential Secret of its namespace, as in Fleet; a GitRepoRestriction's
// allowedClientSecretNames still decides whether it may.
func TestDefaultGitCredential(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	name := ns + "-private"
	_, first := newGitRepo(g, name, appFiles("web", "1"))
	// A server of its own, so that other tests' repositories stay public.
	srv := gittest.NewServer(gitRoot)
	t.Cleanup(srv.Close)
	srv.SetBasicAuth("fleet", "t0ken")

	createGitRepo(g, ns, "private", fleet.GitRepoSpec{Repo: srv.RepoURL(name), PollingInterval: every(time.Second)})
	g.Eventually(getGitRepo(g, ns, "private"), eventually, poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, "authentication failed for "+srv.RepoURL(name)))

	g.Expect(env.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gitcredential"},
		Type:       corev1.SecretTypeBasicAuth,
		Data:       map[string][]byte{"username": []byte("fleet"), "password": []byte("t0ken")},
	})).To(Succeed())
	g.Eventually(bundleCommits(g, ns, "private"), eventually, poll).Should(Equal(map[string]string{"private-apps-web": first}))

	// A restriction that allows only other names refuses the implicit
	// gitcredential; allowing it lets the GitRepo through again.
	res := &fleet.GitRepoRestriction{
		ObjectMeta:               metav1.ObjectMeta{Namespace: ns, Name: "only-creds"},
		AllowedClientSecretNames: []string{"creds"},
	}
	g.Expect(env.Create(ctx, res)).To(Succeed())
	g.Eventually(getGitRepo(g, ns, "private"), eventually, poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, "GitRepoRestriction only-creds does not allow clientSecretName (none)"))
	g.Eventually(func() error {
		if err := env.Get(ctx, client.ObjectKey{Namespace: ns, Name: "only-creds"}, res); err != nil {
			return err
		}
		res.AllowedClientSecretNames = []string{"creds", "gitcredential"}
		return env.Update(ctx, res)
	}, eventually, poll).Should(Succeed())
	g.Eventually(getGitRepo(g, ns, "private"), eventually, poll).Should(condition(fleet.ConditionAccepted, metav1.ConditionTrue, ""))
}

// SSH host keys the Secret lacks come from the known-hosts ConfigMap of the
// system namespace, as in Fleet; the repository is served by a real SSH
// server on loopback. Without an entry for the host the GitRepo says where
// to put one; with another key for it (an impostor) the fetch is refused;
// with the ConfigMap as the install ships it plus the server's key, the
// GitRepo syncs.
func TestKnownHostsFromConfigMap(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	name := ns + "-ssh"
	_, first := newGitRepo(g, name, appFiles("web", "1"))
	pub, clientKey, err := ed25519.GenerateKey(rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	block, err := ssh.MarshalPrivateKey(clientKey, "")
	g.Expect(err).NotTo(HaveOccurred())
	authorized, err := ssh.NewPublicKey(pub)
	g.Expect(err).NotTo(HaveOccurred())
	srv, err := gittest.NewSSHServer(gitRoot, authorized)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(srv.Close)
	g.Expect(env.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ssh"},
		Type:       corev1.SecretTypeSSHAuth,
		Data:       map[string][]byte{corev1.SSHAuthPrivateKey: pem.EncodeToMemory(block)},
	})).To(Succeed())
	createGitRepo(g, ns, "ssh", fleet.GitRepoSpec{Repo: srv.RepoURL(name), ClientSecretName: "ssh", PollingInterval: every(time.Second)})
	g.Eventually(getGitRepo(g, ns, "ssh"), eventually, poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, "Secret ssh has no known_hosts key and the known-hosts ConfigMap"))

	if err := env.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleet.DefaultSystemNamespace}}); err != nil {
		g.Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), "%v", err)
	}
	impostor, _, err := ed25519.GenerateKey(rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	impostorKey, err := ssh.NewPublicKey(impostor)
	g.Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultSystemNamespace, Name: "known-hosts"},
		Data:       map[string]string{"known_hosts": knownhosts.Data + xknownhosts.Line([]string{xknownhosts.Normalize(srv.Addr)}, impostorKey) + "\n"},
	}
	g.Expect(env.Create(ctx, cm)).To(Succeed())
	t.Cleanup(func() { _ = env.Delete(ctx, cm) })
	g.Eventually(getGitRepo(g, ns, "ssh"), eventually, poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, "host key verification failed for "+srv.RepoURL(name)))
	g.Expect(getGitRepo(g, ns, "ssh")().Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("knownhosts: key mismatch"))))
	g.Expect(srv.Fetches()).To(BeZero(), "nothing is asked of a server whose key is not trusted")
	g.Expect(bundles(g, ns, "ssh")).To(BeEmpty())

	cm.Data["known_hosts"] = knownhosts.Data + srv.KnownHostsLine() + "\n"
	g.Expect(env.Update(ctx, cm)).To(Succeed())
	g.Eventually(bundleCommits(g, ns, "ssh"), eventually, poll).Should(Equal(map[string]string{"ssh-apps-web": first}))
	g.Expect(srv.Fetches()).To(BeNumerically(">", 0))
}

// A GitRepo reads its clientSecretName Secret again once it changed, and
// reports it missing once it is deleted, although an unchanged Secret is
// not read again at every poll: rotated credentials take effect at the next
// poll, as when every poll read the Secret.
func TestRotatedCredentials(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	name := ns + "-rotated"
	repo, first := newGitRepo(g, name, appFiles("web", "1"))
	srv := gittest.NewServer(gitRoot)
	t.Cleanup(srv.Close)
	srv.SetBasicAuth("fleet", "old")
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		Type:       corev1.SecretTypeBasicAuth,
		Data:       map[string][]byte{"username": []byte("fleet"), "password": []byte("old")},
	}
	g.Expect(env.Create(ctx, secret)).To(Succeed())
	createGitRepo(g, ns, "rotated", fleet.GitRepoSpec{Repo: srv.RepoURL(name), ClientSecretName: "creds", PollingInterval: every(time.Second)})
	g.Eventually(bundleCommits(g, ns, "rotated"), eventually, poll).Should(Equal(map[string]string{"rotated-apps-web": first}))

	// The server takes only a new password: the Secret, unchanged, fails.
	srv.SetBasicAuth("fleet", "new")
	second := commit(g, repo, appFiles("web", "2"))
	g.Eventually(getGitRepo(g, ns, "rotated"), eventually, poll).Should(
		condition(fleet.ConditionGitPolling, metav1.ConditionFalse, "authentication failed for "+srv.RepoURL(name)))

	// The Secret rotated: the next poll takes the new password.
	g.Eventually(func() error {
		if err := env.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			return err
		}
		secret.Data["password"] = []byte("new")
		return env.Update(ctx, secret)
	}, eventually, poll).Should(Succeed())
	g.Eventually(bundleCommits(g, ns, "rotated"), eventually, poll).Should(Equal(map[string]string{"rotated-apps-web": second}))
	g.Eventually(getGitRepo(g, ns, "rotated"), eventually, poll).Should(condition(fleet.ConditionGitPolling, metav1.ConditionTrue, ""))

	// Deleted: the GitRepo says so rather than poll with what it read.
	g.Expect(env.Delete(ctx, secret)).To(Succeed())
	g.Eventually(getGitRepo(g, ns, "rotated"), eventually, poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, "clientSecretName: Secret creds not found in namespace "+ns))
}
