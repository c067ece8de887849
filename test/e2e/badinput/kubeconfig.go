package badinput

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/satoken"
)

// The workspace of the imported Clusters.
const importWS = "import-ws"

// kubeconfigCase is a Cluster to import whose kubeconfig Secret is bad.
type kubeconfigCase struct {
	name string
	// data is the Secret's data; nil means there is no Secret at all.
	data   func() map[string][]byte
	reason string
	msg    []string
}

// execMarker is the file an exec plugin of a kubeconfig would create, were
// it ever run.
func (f *fixture) execMarker() string { return filepath.Join(f.logDir, "exec-plugin-ran") }

// kubeconfigFor renders a kubeconfig for the server with the given user.
func (f *fixture) kubeconfigFor(server, user string) map[string][]byte {
	ca := base64.StdEncoding.EncodeToString(f.upstream.Config.CAData)
	return map[string][]byte{fleet.KubeConfigSecretValueKey: []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: u, user: %s}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, server, ca, user))}
}

func (f *fixture) toUpstream(user string) func() map[string][]byte {
	return func() map[string][]byte { return f.kubeconfigFor(f.upstream.Config.Host, user) }
}

func kubeconfigData(s string) func() map[string][]byte {
	return func() map[string][]byte { return map[string][]byte{fleet.KubeConfigSecretValueKey: []byte(s)} }
}

// kubeconfigCases are the bad kubeconfig Secrets, one per kind.
func (f *fixture) kubeconfigCases() []kubeconfigCase {
	return []kubeconfigCase{
		{name: "no-secret", reason: fleet.ReasonSecretNotFound,
			msg: []string{"kubeconfig Secret import-ws/no-secret not found", `create it with the kubeconfig under key "value"`}},
		{name: "no-value-key", data: func() map[string][]byte { return map[string][]byte{"kubeconfig": []byte("x")} },
			reason: fleet.ReasonKubeconfigInvalid, msg: []string{`kubeconfig Secret import-ws/no-value-key has no key "value"`}},
		{name: "garbage", data: kubeconfigData("this: is: [not a kubeconfig\n\x00\x01"),
			reason: fleet.ReasonKubeconfigInvalid, msg: []string{"kubeconfig in Secret import-ws/garbage: kubeconfig is not valid YAML"}},
		{name: "exec-plugin", data: func() map[string][]byte {
			return f.kubeconfigFor(f.upstream.Config.Host, fmt.Sprintf(`{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, "touch %s"], interactiveMode: Never}}`, f.execMarker()))
		}, reason: fleet.ReasonKubeconfigInvalid, msg: []string{`kubeconfig user "u" uses an exec plugin (/bin/sh); use a token or client certificate instead`}},
		{name: "auth-provider", data: f.toUpstream(`{auth-provider: {name: oidc, config: {idp-issuer-url: "https://issuer.example.com", client-id: x}}}`),
			reason: fleet.ReasonKubeconfigInvalid, msg: []string{`kubeconfig user "u" uses auth provider "oidc"`}},
		{name: "token-file", data: f.toUpstream(`{tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}`),
			reason: fleet.ReasonKubeconfigInvalid, msg: []string{`kubeconfig user "u" refers to files on disk; inline the credentials`}},
		{name: "cert-file", data: f.toUpstream(`{client-certificate: /etc/kubernetes/pki/admin.crt, client-key: /etc/kubernetes/pki/admin.key}`),
			reason: fleet.ReasonKubeconfigInvalid, msg: []string{`kubeconfig user "u" refers to files on disk`}},
		{name: "no-context", data: kubeconfigData("apiVersion: v1\nkind: Config\nusers: [{name: u, user: {token: x}}]\n"),
			reason: fleet.ReasonKubeconfigInvalid, msg: []string{"kubeconfig is incomplete"}},
		{name: "forged-token", data: f.toUpstream(`{token: forged-token}`),
			reason: fleet.ReasonKubeconfigInvalid, msg: []string{"the cluster rejected the kubeconfig's credentials (Unauthorized); update the kubeconfig Secret"}},
		{name: "no-rights", data: func() map[string][]byte {
			return f.kubeconfigFor(f.upstream.Config.Host, fmt.Sprintf("{token: %q}", f.nobodyToken))
		},
			reason: fleet.ReasonInstallFailed, msg: []string{"the kubeconfig's user lacks the rights to install the agent (it needs cluster-admin)"}},
		{name: "unreachable", data: func() map[string][]byte { return f.kubeconfigFor("https://"+freeAddr(), "{token: x}") },
			reason: fleet.ReasonClusterUnreachable, msg: []string{"reading the kube-system namespace for the cluster identity", "connection refused"}},
	}
}

func (f *fixture) kubeconfigEntries() []TableEntry {
	cases := f.kubeconfigCases()
	out := make([]TableEntry, 0, len(cases))
	for _, c := range cases {
		out = append(out, Entry(c.name+": "+c.reason, c))
	}
	return out
}

func (f *fixture) kubeconfigSurface() {
	BeforeAll(func() {
		Expect(f.admin.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: importWS}})).To(Succeed())
		Expect(f.admin.Create(f.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: importWS, Name: "nobody"}})).To(Succeed())
		var err error
		f.nobodyToken, err = satoken.Mint(f.ctx, f.admin, importWS, "nobody", satoken.MinLifetime)
		must(err)
		for _, c := range f.kubeconfigCases() {
			if c.data != nil {
				Expect(f.admin.Create(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: importWS, Name: c.name}, Data: c.data()})).To(Succeed())
			}
			Expect(f.admin.Create(f.ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: importWS, Name: c.name},
				Spec: fleet.ClusterSpec{KubeConfigSecret: c.name}})).To(Succeed())
		}
	})

	DescribeTable("a Cluster to import whose kubeconfig Secret is bad", func(c kubeconfigCase) {
		cluster := &fleet.Cluster{}
		Eventually(func(g Gomega) {
			g.Expect(f.admin.Get(f.ctx, types.NamespacedName{Namespace: importWS, Name: c.name}, cluster)).To(Succeed())
			imported := conditionOf(cluster.Status.Conditions, fleet.ConditionImported)
			g.Expect(imported.Status).To(Equal(metav1.ConditionFalse), "%+v", cluster.Status.Conditions)
			g.Expect(imported.Reason).To(Equal(c.reason))
			g.Expect(imported.Message).To(containsAll(c.msg...))
		}, timeout, poll).Should(Succeed())
		By("The Cluster says: " + conditionOf(cluster.Status.Conditions, fleet.ConditionImported).Message)

		Expect(cluster.Spec.ClientID).To(BeEmpty(), "no identity was read from the cluster")
		Expect(cluster.Status.AgentDeployedGeneration).To(BeNil(), "no agent was installed")
		Expect(f.notFound(&fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: importWS, Name: names.ImportToken(c.name)}})).
			To(BeTrue(), "no import token was minted")
		_, err := os.Stat(f.execMarker())
		Expect(os.IsNotExist(err)).To(BeTrue(), "no exec plugin ran: %v", err)
		f.expectUndisturbed()
	}, f.kubeconfigEntries())
}
