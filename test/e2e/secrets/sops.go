package secrets

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/age"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// SOPSSpecInput is what SOPSSpec runs against.
type SOPSSpecInput struct {
	// Upstream is the manager's control plane, the manager's controllers
	// running on it, and Admin an admin client of it.
	Upstream *controlplane.ControlPlane
	Admin    client.Client
	// Downstreams are three control planes: two join at the start (prod-0
	// with env=prod, dev with env=dev), the third (prod-1, env=prod) later.
	Downstreams []*controlplane.ControlPlane
	// LogDir receives the agents' logs.
	LogDir string
	// SOPS is the sops CLI (make sops builds it).
	SOPS string
}

func (in SOPSSpecInput) validate() {
	Expect(in.Upstream).NotTo(BeNil(), "SOPSSpec: SOPSSpecInput.Upstream is required")
	Expect(in.Admin).NotTo(BeNil(), "SOPSSpec: SOPSSpecInput.Admin is required")
	Expect(in.Downstreams).To(HaveLen(3), "SOPSSpec: SOPSSpecInput.Downstreams needs three control planes")
	Expect(in.LogDir).NotTo(BeEmpty(), "SOPSSpec: SOPSSpecInput.LogDir is required")
	Expect(in.SOPS).To(BeAnExistingFile(), "SOPSSpec: the sops CLI (run make sops, or set FLEET_SOPS)")
}

const (
	ws        = fleet.DefaultWorkspace
	bundle    = "sops-secret"
	namespace = "sops-app"
)

type joined struct {
	*e2e.JoinedCluster
	name string
}

// SOPSSpec checks that a Secret encrypted by the sops CLI for the recipients of the
// env=prod clusters deploys on prod and fails on dev naming the file and
// why, deploying nothing there; a prod cluster that joins later cannot
// open it until `sops updatekeys` adds it, and then deploys it. Call it in
// an Ordered container.
func SOPSSpec(ctx context.Context, inputGetter func() SOPSSpecInput) {
	var (
		in       SOPSSpecInput
		clusters = map[string]*joined{}
	)
	join := func(i int, name, env string) *joined {
		GinkgoHelper()
		j := e2e.Join(ctx, e2e.JoinInput{Upstream: in.Upstream, Downstream: in.Downstreams[i], Admin: in.Admin, LogDir: in.LogDir,
			ConfigArgs: []string{"-l", "name=" + name, "-l", "env=" + env},
			AgentArgs:  []string{"--checkin-interval", "5s", "--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "30s"},
		}, 90*time.Second)
		c := &joined{JoinedCluster: j, name: name}
		clusters[name] = c
		return c
	}
	BeforeAll(func() {
		in = inputGetter()
		in.validate()
		join(0, "prod-0", "prod")
		join(1, "dev", "dev")
	})
	AfterAll(func() {
		for _, c := range clusters {
			c.StopAgents()
		}
	})

	It("deploys a SOPS file on the clusters it was encrypted for, fails with the reason elsewhere, and on a new cluster after sops updatekeys", func() {
		value := fmt.Sprintf("sops-%d-only-on-prod", time.Now().UnixNano())
		dir := GinkgoT().TempDir()
		// The author keeps an age key of their own among the recipients, so
		// that they (and sops updatekeys) can open the file again.
		author, err := age.GenerateX25519Identity()
		Expect(err).NotTo(HaveOccurred())

		prod := waitRecipients(in, "env=prod", 1)
		Expect(waitRecipients(in, "env=dev", 1)).NotTo(Equal(prod))
		writeSOPSConfig(dir, author.Recipient().String()+","+prod)
		secret := filepath.Join(dir, "secret.yaml")
		Expect(os.WriteFile(secret, fmt.Appendf(nil, `apiVersion: v1
kind: Secret
metadata:
  name: db
type: Opaque
stringData:
  password: %s
`, value), 0o600)).To(Succeed())
		runSOPS(in, dir, author, "--encrypt", "--in-place", "secret.yaml")
		encrypted := read(secret)
		Expect(encrypted).NotTo(ContainSubstring(value))
		Expect(encrypted).To(ContainSubstring(prod))

		b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: bundle}, Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: namespace, CreateNamespace: ptr.To(true)},
			Resources: []fleet.BundleResource{
				{Name: "secret.yaml", Content: encrypted},
				{Name: "settings.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  greeting: hello\n"},
			},
			Targets: []fleet.BundleTarget{{Name: "envs", ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "dev"}},
			}}}},
		}}
		Expect(in.Admin.Create(ctx, b)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(in.Admin.Delete(context.Background(), b))).To(Succeed()) })

		clusters["prod-0"].waitSecret(ctx, value)
		clusters["dev"].waitUnreadable(ctx, value)

		By("a new prod cluster joins: it cannot open the file until it is among its recipients")
		join(2, "prod-1", "prod")
		clusters["prod-1"].waitUnreadable(ctx, value)
		prods := waitRecipients(in, "env=prod", 2)
		Expect(prods).To(ContainSubstring(prod))
		writeSOPSConfig(dir, author.Recipient().String()+","+prods)
		runSOPS(in, dir, author, "updatekeys", "--yes", "secret.yaml")
		updated := read(secret)
		Expect(updated).NotTo(ContainSubstring(value))
		Eventually(func() error {
			got := &fleet.Bundle{}
			if err := in.Admin.Get(ctx, client.ObjectKeyFromObject(b), got); err != nil {
				return err
			}
			got.Spec.Resources[0].Content = updated
			return in.Admin.Update(ctx, got)
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

		clusters["prod-1"].waitSecret(ctx, value)
		clusters["prod-0"].waitSecret(ctx, value)
		clusters["dev"].waitUnreadable(ctx, value)

		By("the value is in no agent's log, and in no Bundle, Content or BundleDeployment upstream")
		for _, c := range clusters {
			for _, p := range c.Agents {
				Expect(p.Output()).NotTo(ContainSubstring(value), "the log of %s", p.Name)
			}
		}
		noValueUpstream(ctx, in.Admin, value)
	})
}

// waitRecipients waits until `fleet secret recipients --selector selector
// --format sops` prints n recipients, and returns its line.
func waitRecipients(in SOPSSpecInput, selector string, n int) string {
	GinkgoHelper()
	var line string
	e2e.WaitFor("the age recipients of "+selector, func(g Gomega) {
		out, err := framework.Run("fleet", "secret", "recipients", "-k", in.Upstream.Kubeconfig, "--selector", selector, "--format", "sops")
		g.Expect(err).NotTo(HaveOccurred())
		line = strings.TrimSpace(string(out))
		rs := strings.Split(line, ",")
		g.Expect(rs).To(HaveLen(n), "recipients of %s: %q", selector, line)
		for _, r := range rs {
			g.Expect(r).To(HavePrefix("age1"))
		}
	}, 60*time.Second, time.Second)
	return line
}

// writeSOPSConfig writes the .sops.yaml that sops --encrypt and sops
// updatekeys read their recipients from, as a repository would keep it.
func writeSOPSConfig(dir, recipients string) {
	GinkgoHelper()
	Expect(os.WriteFile(filepath.Join(dir, ".sops.yaml"), fmt.Appendf(nil, "creation_rules:\n- path_regex: \\.yaml$\n  age: %s\n", recipients), 0o600)).To(Succeed())
}

// runSOPS runs the sops CLI in dir as the author.
func runSOPS(in SOPSSpecInput, dir string, author *age.X25519Identity, args ...string) {
	GinkgoHelper()
	cmd := exec.Command(in.SOPS, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SOPS_AGE_KEY="+author.String(), "SOPS_AGE_KEY_FILE=/nonexistent")
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "sops %s:\n%s", strings.Join(args, " "), out)
}

func read(path string) string {
	GinkgoHelper()
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

func (c *joined) bd(ctx context.Context, g Gomega) *fleet.BundleDeployment {
	bd := &fleet.BundleDeployment{}
	g.Expect(c.Admin.Get(ctx, types.NamespacedName{Namespace: c.Cred.ClusterNamespace, Name: bundle}, bd)).To(Succeed())
	return bd
}

// waitSecret waits for the cluster to deploy the bundle, with the Secret
// opened downstream.
func (c *joined) waitSecret(ctx context.Context, value string) {
	GinkgoHelper()
	e2e.WaitFor("the SOPS Secret on "+c.name, func(g Gomega) {
		bd := c.bd(ctx, g)
		g.Expect(bd.Status.AppliedDeploymentID).To(Equal(bd.Spec.DeploymentID), "%s: %s\nagent log:\n%s", c.name, summary.Message(bd), c.Agent.Tail(3000))
		g.Expect(summary.State(bd)).To(Equal(fleet.Ready), "%s: %s", c.name, summary.Message(bd))
		s := &corev1.Secret{}
		g.Expect(c.Local.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "db"}, s)).To(Succeed())
		g.Expect(string(s.Data["password"])).To(Equal(value))
		g.Expect(c.Local.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "settings"}, &corev1.ConfigMap{})).To(Succeed())
	}, 90*time.Second, 250*time.Millisecond)
}

// waitUnreadable waits for the cluster's BundleDeployment to say that
// secret.yaml does not open there, and checks that nothing of the bundle
// was deployed and that the status holds no value.
func (c *joined) waitUnreadable(ctx context.Context, value string) {
	GinkgoHelper()
	e2e.WaitFor("the SOPS file to be unreadable on "+c.name, func(g Gomega) {
		bd := c.bd(ctx, g)
		cond := conditions.Get(bd, fleet.ConditionDeployed)
		g.Expect(cond).NotTo(BeNil(), "%s: no Deployed condition yet", c.name)
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(fleet.ReasonSOPSUnreadable))
		g.Expect(cond.Message).To(ContainSubstring("SOPS file secret.yaml does not open on this cluster"))
		g.Expect(cond.Message).To(ContainSubstring("not one of its age recipients"))
		g.Expect(summary.State(bd)).NotTo(Equal(fleet.Ready))
		status, err := json.Marshal(bd.Status)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(status)).NotTo(ContainSubstring(value))
	}, 90*time.Second, 250*time.Millisecond)
	err := c.Local.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "settings"}, &corev1.ConfigMap{})
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing of the bundle is deployed on %s: %v", c.name, err)
	err = c.Local.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "db"}, &corev1.Secret{})
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing of the bundle is deployed on %s: %v", c.name, err)
}

// noValueUpstream checks that the Bundles, Contents and BundleDeployments
// of the manager hold the file only encrypted.
func noValueUpstream(ctx context.Context, admin client.Client, value string) {
	GinkgoHelper()
	bundles, contents, bds := &fleet.BundleList{}, &fleet.ContentList{}, &fleet.BundleDeploymentList{}
	for _, l := range []client.ObjectList{bundles, contents, bds} {
		Expect(admin.List(ctx, l)).To(Succeed())
		b, err := json.Marshal(l)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).NotTo(ContainSubstring(value), "%T", l)
	}
	Expect(contents.Items).NotTo(BeEmpty())
	for i := range contents.Items { // gzipped: look inside
		resources, err := content.Decode(&contents.Items[i])
		Expect(err).NotTo(HaveOccurred())
		b, err := json.Marshal(resources)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).NotTo(ContainSubstring(value), "Content %s", contents.Items[i].Name)
	}
}
