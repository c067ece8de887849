package upstream_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/upstream"
	"github.com/gitfleet/fleet/internal/registration"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

// TestFollowMovesOnlyToAnAddressThatWorks runs against a real API server,
// reached through two proxies (the manager's old and new address): the
// agent follows the published address only where the manager accepts its
// credential, keeps the same credential, and stores what it follows.
func TestFollowMovesOnlyToAnAddressThatWorks(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	cp, err := controlplane.Start(controlplane.Options{Name: "follow"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	admin, err := cp.Client(kinds.Scheme())
	g.Expect(err).NotTo(HaveOccurred())

	// The agent's cluster namespace upstream, and an agent's rights there.
	const clusterNS, agentNS = "cluster-follow", "fleet-system"
	for _, ns := range []string{clusterNS, agentNS} {
		g.Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	g.Expect(admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "agent"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
		{APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"bundledeployments"}, Verbs: []string{"list"}},
	}})).To(Succeed())
	g.Expect(admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "agent"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "agent"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: clusterNS, Name: "agent"}}})).To(Succeed())
	_, saCfg, err := framework.ServiceAccountClient(ctx, admin, cp.Config, kinds.Scheme(), clusterNS, "agent")
	g.Expect(err).NotTo(HaveOccurred())

	proxy := func() *framework.Proxy {
		p, err := framework.NewProxy(cp.Config.Host)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	oldAddr, newAddr, gone := proxy(), proxy(), proxy()
	g.Expect(gone.Close()).To(Succeed())
	cred := &upstream.Credential{APIServerURL: oldAddr.URL, APIServerCA: cp.Config.CAData, Token: saCfg.BearerToken,
		ClusterName: "follow", Namespace: "fleet-default", ClusterNamespace: clusterNS, ClientID: "id"}
	publish := func(url string, ca []byte) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: registration.AddressConfigMap}}
		data := map[string]string{registration.AddressURLKey: url, registration.AddressCAKey: string(ca)}
		g.Expect(writeConfigMap(ctx, admin, cm, data)).To(Succeed())
		// The agent reads the address from the API server's watch cache
		// (Published), which may lag the write for a moment: wait until it
		// serves what was written, so that each step reads this address.
		g.Eventually(func() (map[string]string, error) {
			got := &corev1.ConfigMap{}
			err := admin.Get(ctx, client.ObjectKeyFromObject(cm), got, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}})
			return got.Data, err
		}).WithTimeout(10*time.Second).Should(Equal(data), "the watch cache serving the published address")
	}

	// Nothing published: nothing to follow.
	g.Eventually(func() error { _, err := upstream.Follow(ctx, admin, agentNS, cred); return err }).WithTimeout(10 * time.Second).Should(Succeed())

	// The same address (a trailing slash aside), without a CA: no move.
	publish(strings.TrimRight(oldAddr.URL, "/"), nil)
	moved, err := upstream.Follow(ctx, admin, agentNS, cred)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved).To(BeFalse())

	// An address that does not answer: the agent stays, and says why.
	publish(gone.URL, cp.Config.CAData)
	moved, err = upstream.Follow(ctx, admin, agentNS, cred)
	g.Expect(moved).To(BeFalse())
	g.Expect(err).To(MatchError(ContainSubstring("staying at " + oldAddr.URL)))
	stored, err := upstream.LoadStored(ctx, admin, agentNS)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored).To(BeNil(), "nothing stored")

	// A CA that is not the API server's: the agent stays.
	publish(newAddr.URL, otherCA(t))
	moved, err = upstream.Follow(ctx, admin, agentNS, cred)
	g.Expect(moved).To(BeFalse())
	g.Expect(err).To(MatchError(ContainSubstring("certificate")))

	// The new address, without a CA: the agent's own CA works there.
	publish(newAddr.URL, nil)
	moved, err = upstream.Follow(ctx, admin, agentNS, cred)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved).To(BeTrue())
	stored, err = upstream.LoadStored(ctx, admin, agentNS)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored).NotTo(BeNil())
	g.Expect(stored.APIServerURL).To(Equal(newAddr.URL))
	g.Expect(stored.APIServerCA).To(Equal(cp.Config.CAData))
	g.Expect(stored.Token).To(Equal(cred.Token), "the same credential")
	g.Expect(stored.ClusterNamespace).To(Equal(clusterNS))
	g.Expect(upstream.Check(ctx, stored)).To(Succeed(), "it works at the new address")

	// Nothing published, but the manager told an address with the grant:
	// followed the same way, and kept with the credential.
	published := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: registration.AddressConfigMap}}
	g.Expect(admin.Delete(ctx, published)).To(Succeed())
	// As for publish: the watch cache may serve the deleted address for a
	// moment (seen in CI, where the agent then followed it).
	g.Eventually(func() bool {
		err := admin.Get(ctx, client.ObjectKeyFromObject(published), &corev1.ConfigMap{}, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}})
		return apierrors.IsNotFound(err)
	}).WithTimeout(10*time.Second).Should(BeTrue(), "the watch cache no longer serving the deleted address")
	told := *cred
	told.PublishedURL, told.PublishedCA = gone.URL, cp.Config.CAData
	moved, err = upstream.Follow(ctx, admin, agentNS, &told)
	g.Expect(moved).To(BeFalse())
	g.Expect(err).To(MatchError(ContainSubstring("staying at "+oldAddr.URL)), "a told address that does not answer is not followed")
	told.PublishedURL = newAddr.URL
	moved, err = upstream.Follow(ctx, admin, agentNS, &told)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved).To(BeTrue())
	stored, err = upstream.LoadStored(ctx, admin, agentNS)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored.APIServerURL).To(Equal(newAddr.URL))
	g.Expect(stored.PublishedURL).To(Equal(newAddr.URL), "the told address is kept")
	moved, err = upstream.Follow(ctx, admin, agentNS, stored)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved).To(BeFalse(), "there already")
}

// writeConfigMap writes cm with data, creating it if needed.
func writeConfigMap(ctx context.Context, c client.Client, cm *corev1.ConfigMap, data map[string]string) error {
	err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	cm.Data = data
	if err != nil {
		return c.Create(ctx, cm)
	}
	return c.Update(ctx, cm)
}

// otherCA is a CA certificate, in PEM, of no API server here.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the manager"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
