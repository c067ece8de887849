package security_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/framework"
)

const (
	// confinedNS is the downstream namespace the limited account may write.
	confinedNS = "app"
	// confinedAccount is the bundle's serviceAccount.
	confinedAccount = "limited"
	// confinedLabel selects the attacker's cluster.
	confinedLabel = "sec-confinement"
)

// confinement is what the specs of hole 13 share.
type confinement struct {
	down    client.Client
	cluster *fleet.Cluster
	cred    *upstream.Credential
	agent   *framework.Process
	before  map[string]string
}

// Hole 13: a bundle with a serviceAccount must not do downstream what that
// account may not, and a bundle with a forced namespace must not leave it:
// not through Helm hooks, not through crds/, not through valuesFrom.
//
// The attacker (foothold e or f) controls the content of a bundle deployed
// with `serviceAccount: limited`, an account that downstream may only manage
// ConfigMaps and Secrets (Helm's release records) in namespace "app". The
// Bundle is created as the GitRepo controller would from the attacker's
// repository; the downstream cluster runs a real agent registered with a
// registration token.
var _ = Describe("Hole 13: a bundle's serviceAccount and namespace confine the agent", Ordered, ContinueOnFailure, confinementSpecs)

// confinementSpecs are the specs of hole 13, in that order.
func confinementSpecs() {
	s := &confinement{}

	BeforeAll(func() {
		ctx := env.Ctx
		ds := env.Downstreams[0]
		scheme := kinds.NewScheme()
		Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
		var err error
		s.down, err = client.New(ds.Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		By("registering a real agent in the downstream cluster with a registration token")
		tokenYAML, err := framework.Run("fleet", "install", "agent-token", "-k", env.Upstream.Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.ApplyYAML(ctx, s.down, tokenYAML)).To(Succeed())
		configYAML, err := framework.Run("fleet", "install", "agent-config", "-l", confinedLabel+"=yes")
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.ApplyYAML(ctx, s.down, configYAML)).To(Succeed())
		s.agent, err = framework.Start(env.LogDir, "agent-confinement", "fleet-agent", "--kubeconfig", ds.Kubeconfig,
			"--checkin-interval", "5s", "--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "30s")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(s.agent.Stop)
		Eventually(func(g Gomega) {
			s.cred, err = upstream.LoadStored(ctx, s.down, fleet.DefaultSystemNamespace)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.cred).NotTo(BeNil(), "no credential stored yet; agent log:\n%s", s.agent.Tail(4000))
		}, 90*time.Second, 200*time.Millisecond).Should(Succeed())
		s.cluster = &fleet.Cluster{}
		Expect(env.Admin.Get(ctx, types.NamespacedName{Namespace: s.cred.Namespace, Name: s.cred.ClusterName}, s.cluster)).To(Succeed())

		By("giving the downstream cluster the limited account: ConfigMaps and Helm's Secrets in app, nothing else")
		om := metav1.ObjectMeta{Namespace: confinedNS, Name: confinedAccount}
		for _, obj := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: confinedNS}},
			&corev1.ServiceAccount{ObjectMeta: om},
			&rbacv1.Role{ObjectMeta: om, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}},
			&rbacv1.RoleBinding{ObjectMeta: om, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: confinedAccount},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: confinedNS, Name: confinedAccount}}},
			// What a valuesFrom attack would read, and the account may not.
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "sec-values"},
				Data: map[string][]byte{"values.yaml": []byte("stolen: s3cret-from-kube-system\n")}},
		} {
			Expect(s.down.Create(ctx, obj)).To(Succeed())
		}
		s.before = confinedSnapshot(s.down)
	})

	AfterAll(func() {
		Expect(confinedSnapshot(s.down)).To(Equal(s.before), "kube-system and the CRDs of the downstream cluster did not change")
	})

	hookAndCRDSpecs(s)
	valuesReleaseAndDeleteSpecs(s)
}

// hookAndCRDSpecs: hooks and CRDs of the attacker's chart are confined.
func hookAndCRDSpecs(s *confinement) {
	It("13: a hook in kube-system is refused by the downstream RBAC of the bundle's serviceAccount", func() {
		cond := s.deploy("sec-hook-rbac", s.withAccount(fleet.BundleDeploymentOptions{DefaultNamespace: confinedNS}), map[string]string{
			"templates/app.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sec-hook-rbac-app}\ndata: {a: b}\n",
			"templates/hook.yaml": confinedHook("sec-hook-rbac", "kube-system"),
		})
		Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		Expect(cond.Reason).To(Equal(fleet.ReasonInstallFailed))
		Expect(cond.Message).To(ContainSubstring("forbidden"))
		Expect(cond.Message).To(ContainSubstring("system:serviceaccount:app:limited"))
		expectNoConfigMap(s.down, "kube-system", "sec-hook-rbac")
	})

	It("13: a hook in kube-system obeys the forced namespace; the account deploys what it may", func() {
		cond := s.deploy("sec-hook-forced", s.withAccount(fleet.BundleDeploymentOptions{TargetNamespace: confinedNS}), map[string]string{
			"templates/app.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sec-hook-forced-app, namespace: kube-system}\ndata: {a: b}\n",
			"templates/hook.yaml": confinedHook("sec-hook-forced", "kube-system"),
		})
		Expect(cond.Status).To(Equal(metav1.ConditionTrue), cond.Message)
		for _, n := range []string{"sec-hook-forced", "sec-hook-forced-app"} {
			Expect(s.down.Get(env.Ctx, types.NamespacedName{Namespace: confinedNS, Name: n}, &corev1.ConfigMap{})).To(Succeed(), "%s is in app", n)
			expectNoConfigMap(s.down, "kube-system", n)
		}
	})

	It("13: a cluster-scoped hook under a forced namespace is refused with NamespaceViolation", func() {
		cond := s.deploy("sec-hook-cluster", s.withAccount(fleet.BundleDeploymentOptions{TargetNamespace: confinedNS}), map[string]string{
			"templates/hook.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: sec-hook-cluster\n" +
				"  annotations: {helm.sh/hook: pre-install}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n" +
				"subjects: [{kind: ServiceAccount, name: limited, namespace: app}]\n",
		})
		Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		Expect(cond.Reason).To(Equal(fleet.ReasonNamespaceViolation), cond.Message)
		err := s.down.Get(env.Ctx, types.NamespacedName{Name: "sec-hook-cluster"}, &rbacv1.ClusterRoleBinding{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no ClusterRoleBinding was made: %v", err)
	})

	It("13: a chart with crds/ is refused under a forced namespace, and by RBAC for the serviceAccount", func() {
		cond := s.deploy("sec-crds-forced", s.withAccount(fleet.BundleDeploymentOptions{TargetNamespace: confinedNS}), map[string]string{
			"crds/crd.yaml": confinedCRD("forced"),
		})
		Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		Expect(cond.Reason).To(Equal(fleet.ReasonNamespaceViolation), cond.Message)
		Expect(cond.Message).To(ContainSubstring("CRDs"))

		cond = s.deploy("sec-crds-rbac", s.withAccount(fleet.BundleDeploymentOptions{DefaultNamespace: confinedNS}), map[string]string{
			"crds/crd.yaml": confinedCRD("rbac"),
		})
		Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		Expect(cond.Reason).To(Equal(fleet.ReasonInstallFailed), cond.Message)
		Expect(cond.Message).To(ContainSubstring("forbidden"))
		for _, n := range []string{"forced", "rbac"} {
			err := s.down.Get(env.Ctx, types.NamespacedName{Name: "sec" + n + "s.attack.example.com"}, &apiextensionsv1.CustomResourceDefinition{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "CRD %s was not made: %v", n, err)
		}
	})
}

// valuesReleaseAndDeleteSpecs: valuesFrom, Helm's release records and
// deleteNamespace run as the serviceAccount, and the victim is untouched.
func valuesReleaseAndDeleteSpecs(s *confinement) {
	It("13: valuesFrom a Secret in kube-system is refused for the serviceAccount, and nothing of it is deployed", func() {
		opts := s.withAccount(fleet.BundleDeploymentOptions{DefaultNamespace: confinedNS, Helm: &fleet.HelmOptions{ValuesFrom: []fleet.ValuesFrom{{
			SecretKeyRef: &fleet.SecretKeySelector{Namespace: "kube-system", Name: "sec-values"},
		}}}})
		cond := s.deploy("sec-values", opts, map[string]string{
			"templates/leak.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sec-values-leak}\ndata: {stolen: {{ .Values.stolen | quote }}}\n",
		})
		Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		Expect(cond.Reason).To(Equal(fleet.ReasonForbidden), cond.Message)
		Expect(cond.Message).NotTo(ContainSubstring("s3cret-from-kube-system"))
		expectNoConfigMap(s.down, confinedNS, "sec-values-leak")
	})

	It("13: Helm's release records are written as the serviceAccount: none lands in kube-system", func() {
		cond := s.deploy("sec-storage", s.withAccount(fleet.BundleDeploymentOptions{DefaultNamespace: "kube-system"}), map[string]string{
			"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sec-storage}\ndata: {a: b}\n",
		})
		Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		Expect(cond.Message).To(ContainSubstring("forbidden"))
		expectNoConfigMap(s.down, "kube-system", "sec-storage")
		// The snapshot compared in AfterAll holds kube-system's Secrets:
		// no sh.helm.release.v1.sec-storage.v1 may appear there.
	})

	It("13: deleteNamespace runs as the serviceAccount: a namespace it may not delete stays", func() {
		opts := s.withAccount(fleet.BundleDeploymentOptions{DefaultNamespace: confinedNS, DeleteNamespace: true})
		cond := s.deploy("sec-delete-ns", opts, map[string]string{
			"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sec-delete-ns}\ndata: {a: b}\n",
		})
		Expect(cond.Status).To(Equal(metav1.ConditionTrue), cond.Message)
		Expect(env.Admin.Delete(env.Ctx, &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultWorkspace, Name: "sec-delete-ns"}})).To(Succeed())
		By("the release is uninstalled as the account")
		Eventually(func() bool {
			err := s.down.Get(env.Ctx, types.NamespacedName{Namespace: confinedNS, Name: "sec-delete-ns"}, &corev1.ConfigMap{})
			return apierrors.IsNotFound(err)
		}, 60*time.Second, 250*time.Millisecond).Should(BeTrue(), "agent log:\n%s", s.agent.Tail(4000))
		Consistently(func(g Gomega) {
			ns := &corev1.Namespace{}
			g.Expect(s.down.Get(env.Ctx, types.NamespacedName{Name: confinedNS}, ns)).To(Succeed())
			g.Expect(ns.DeletionTimestamp).To(BeNil(), "namespace %s is not being deleted", confinedNS)
		}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	It("13: the victim cluster of the agent's fleet was not touched", func() {
		got := &fleet.Cluster{}
		Expect(env.Admin.Get(env.Ctx, client.ObjectKeyFromObject(s.cluster), got)).To(Succeed())
		Expect(got.UID).To(Equal(s.cluster.UID))
	})
}

// deploy creates the attacker's bundle for the cluster and returns its
// BundleDeployment's Deployed condition once the agent decided.
func (s *confinement) deploy(name string, opts fleet.BundleDeploymentOptions, files map[string]string) *metav1.Condition {
	GinkgoHelper()
	res := make([]fleet.BundleResource, 0, 1+len(files))
	res = append(res, fleet.BundleResource{Name: "Chart.yaml", Content: "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n"})
	for n, c := range files {
		res = append(res, fleet.BundleResource{Name: n, Content: c})
	}
	Expect(env.Admin.Create(env.Ctx, &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultWorkspace, Name: name},
		Spec: fleet.BundleSpec{BundleDeploymentOptions: opts, Resources: res, Targets: []fleet.BundleTarget{{
			Name: "confined", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{confinedLabel: "yes"}}}}},
	})).To(Succeed())
	var cond *metav1.Condition
	Eventually(func(g Gomega) {
		bd := &fleet.BundleDeployment{}
		g.Expect(env.Admin.Get(env.Ctx, types.NamespacedName{Namespace: s.cred.ClusterNamespace, Name: name}, bd)).To(Succeed())
		cond = meta.FindStatusCondition(bd.Status.Conditions, fleet.ConditionDeployed)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).NotTo(Equal(metav1.ConditionUnknown), "agent log:\n%s", s.agent.Tail(4000))
	}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
	return cond
}

// withAccount sets the limited account on o.
func (s *confinement) withAccount(o fleet.BundleDeploymentOptions) fleet.BundleDeploymentOptions {
	o.ServiceAccount = confinedAccount
	return o
}

// confinedHook is a pre-install hook ConfigMap name in namespace ns.
func confinedHook(name, ns string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n  annotations: {helm.sh/hook: pre-install}\ndata: {planted: \"yes\"}\n", name, ns)
}

// confinedCRD is a CRD sec<plural>s.attack.example.com.
func confinedCRD(plural string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sec%[1]ss.attack.example.com}
spec:
  group: attack.example.com
  scope: Cluster
  names: {plural: sec%[1]ss, singular: sec%[1]s, kind: Sec%[1]s}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, plural)
}

func expectNoConfigMap(c client.Client, ns, name string) {
	GinkgoHelper()
	err := c.Get(env.Ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.ConfigMap{})
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ConfigMap %s/%s must not exist: %v", ns, name, err)
}

// confinedSnapshot is kind/name -> resourceVersion of what an escaped
// bundle would write: kube-system's ConfigMaps, Secrets, Jobs and
// RoleBindings, every CRD and ClusterRoleBinding.
func confinedSnapshot(c client.Client) map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	for kind, list := range map[string]client.ObjectList{
		"ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{}, "Job": &batchv1.JobList{},
		"RoleBinding": &rbacv1.RoleBindingList{}, "CRD": &apiextensionsv1.CustomResourceDefinitionList{},
		"ClusterRoleBinding": &rbacv1.ClusterRoleBindingList{},
	} {
		opts := []client.ListOption{}
		if kind != "CRD" && kind != "ClusterRoleBinding" {
			opts = append(opts, client.InNamespace("kube-system"))
		}
		Expect(c.List(env.Ctx, list, opts...)).To(Succeed())
		Expect(meta.EachListItem(list, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err != nil {
				return err
			}
			out[kind+"/"+m.GetName()] = m.GetResourceVersion()
			return nil
		})).To(Succeed())
	}
	return out
}
