package ocistorage_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/test/chartrepo"
)

func secret(data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ocistorage", Namespace: "ns"}, Type: fleet.OCIStorageSecretType, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestFromSecret(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secret  *corev1.Secret
		wantErr string
		want    ocistorage.Options
	}{
		{name: "full", secret: secret(map[string]string{"reference": "reg.example:5000/fleet/", "username": "w", "password": "p",
			"agentUsername": "r", "agentPassword": "q", "basicHTTP": "true", "insecureSkipTLS": "false"}),
			want: ocistorage.Options{Reference: "reg.example:5000/fleet", Username: "w", Password: "p", AgentUsername: "r", AgentPassword: "q", BasicHTTP: true}},
		{name: "no reference", secret: secret(map[string]string{"username": "w"}), wantErr: `no "reference" key`},
		{name: "scheme", secret: secret(map[string]string{"reference": "oci://reg.example/fleet"}), wantErr: "without a scheme"},
		{name: "wrong type", secret: func() *corev1.Secret {
			s := secret(map[string]string{"reference": "reg"})
			s.Type = corev1.SecretTypeOpaque
			return s
		}(),
			wantErr: "must have type " + fleet.OCIStorageSecretType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o, err := ocistorage.FromSecret(tc.secret)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(o).To(Equal(tc.want))
		})
	}
}

func TestAgentSecretCarriesOnlyTheAgentsCredentials(t *testing.T) {
	g := NewWithT(t)
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "cluster-ns", UID: "u1"}}
	s := ocistorage.Options{Reference: "reg/fleet", Username: "writer", Password: "wp", AgentUsername: "reader", AgentPassword: "rp", BasicHTTP: true}.AgentSecret(bd)
	g.Expect(s.Namespace).To(Equal("cluster-ns"))
	g.Expect(s.Name).To(Equal("app"))
	g.Expect(string(s.Type)).To(Equal(fleet.OCIStorageSecretType))
	g.Expect(s.OwnerReferences).To(HaveLen(1))
	g.Expect(s.OwnerReferences[0].UID).To(BeEquivalentTo("u1"))
	g.Expect(s.Data).To(Equal(map[string][]byte{"reference": []byte("reg/fleet"), "username": []byte("reader"), "password": []byte("rp"), "basicHTTP": []byte("true")}))
	back, err := ocistorage.FromSecret(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Username).To(Equal("reader"))

	// Without agent credentials, agents get the manager's (as in Fleet).
	s = ocistorage.Options{Reference: "reg/fleet", Username: "writer", Password: "wp"}.AgentSecret(bd)
	g.Expect(string(s.Data["username"])).To(Equal("writer"))
}

// TestPushPull runs against a real registry on loopback that scopes each
// user to repository prefixes.
func TestPushPull(t *testing.T) {
	g := NewWithT(t)
	reg := chartrepo.NewAuthRegistry(map[string]chartrepo.Access{
		"manager": {Password: "mp", Push: true, Prefixes: []string{"tenant-a", "tenant-b"}},
		"agent-a": {Password: "ap", Prefixes: []string{"tenant-a"}},
		"agent-b": {Password: "bp", Prefixes: []string{"tenant-b"}},
	})
	defer reg.Close()
	ctx := context.Background()
	raw, _, err := content.Marshal([]fleet.BundleResource{{Name: "cm.yaml", Content: strings.Repeat("x", 4096)}})
	g.Expect(err).NotTo(HaveOccurred())
	name := content.ContentsID(raw)

	mgrA := ocistorage.Options{Reference: reg.Host() + "/tenant-a", Username: "manager", Password: "mp", AgentUsername: "agent-a", AgentPassword: "ap", BasicHTTP: true}
	g.Expect(mgrA.Push(ctx, nil, name, raw)).To(Succeed())
	g.Expect(mgrA.Push(ctx, nil, name, raw)).To(Succeed(), "pushing again is a no-op")
	g.Expect(mgrA.Push(ctx, nil, name, []byte("other"))).To(MatchError(ContainSubstring("digest")))

	agentA := ocistorage.Options{Reference: mgrA.Reference, Username: "agent-a", Password: "ap", BasicHTTP: true}
	got, err := agentA.Pull(ctx, nil, name, 1<<20)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(raw))
	res, err := content.Unmarshal(got)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(HaveLen(1))

	_, err = agentA.Pull(ctx, nil, name, 100)
	g.Expect(err).To(MatchError(ocistorage.ErrTooLarge))

	// The read-only credential cannot push.
	g.Expect(agentA.Push(ctx, nil, name, raw)).NotTo(Succeed())

	// Another tenant's credential cannot read tenant-a's repositories, even
	// knowing the digest, nor through its own prefix.
	agentB := ocistorage.Options{Reference: mgrA.Reference, Username: "agent-b", Password: "bp", BasicHTTP: true}
	_, err = agentB.Pull(ctx, nil, name, 1<<20)
	g.Expect(err).To(HaveOccurred())
	g.Expect(reg.Refused("agent-b")).To(BeNumerically(">", 0))
	agentB.Reference = reg.Host() + "/tenant-b"
	_, err = agentB.Pull(ctx, nil, name, 1<<20)
	g.Expect(err).To(HaveOccurred(), "the content is in tenant-a's repository only")
}
