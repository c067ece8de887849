package badinput

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// apiCase is an object the API server must refuse: created anew (obj), or a
// merge patch of one of the healthy objects (patch on target).
type apiCase struct {
	obj    string
	target func() client.Object
	patch  string
	msg    []string
}

func created(obj string, msg ...string) apiCase { return apiCase{obj: obj, msg: msg} }

func patched(target func() client.Object, patch string, msg ...string) apiCase {
	return apiCase{target: target, patch: patch, msg: msg}
}

func healthyGitRepo() client.Object {
	return &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: healthyRepo}}
}

func healthyBundle() client.Object {
	return &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: healthyBundles()[0]}}
}

func healthyCluster() client.Object {
	return &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: healthyClusters()[0]}}
}

func kind(kind, name, spec string) string {
	return fmt.Sprintf("apiVersion: fleet.cattle.io/v1alpha1\nkind: %s\nmetadata: {name: api-%s, namespace: %s}\nspec: %s\n", kind, name, ws, spec)
}

func (f *fixture) apiSurface() {
	DescribeTable("an object the API server refuses, naming the field", func(c apiCase) {
		var err error
		var obj client.Object
		if c.obj != "" {
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal([]byte(c.obj), &u.Object)).To(Succeed())
			obj = u
			// Strict: a field the schema does not know is an error, as
			// `kubectl apply` reports it, not silently pruned.
			err = f.admin.Create(f.ctx, u, client.FieldValidation("Strict"))
		} else {
			obj = c.target()
			Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			rv := obj.GetResourceVersion()
			err = f.admin.Patch(f.ctx, obj, client.RawPatch(types.MergePatchType, []byte(c.patch)), client.FieldValidation("Strict"))
			Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			Expect(obj.GetResourceVersion()).To(Equal(rv), "the refused change left %s as it was", describe(obj))
		}
		Expect(err).To(HaveOccurred(), "the API server accepted it")
		Expect(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(containsAll(c.msg...))
		By("The API server says: " + err.Error())
		if c.obj != "" {
			// A failed Create decodes the server's Status into obj: read it anew.
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal([]byte(c.obj), &u.Object)).To(Succeed())
			Expect(f.notFound(u)).To(BeTrue(), "nothing was created")
		}
		f.expectUndisturbed()
	},
		Entry("a token ttl that is no duration", created(kind("ClusterRegistrationToken", "bad-ttl", `{ttl: "1 week"}`), "spec.ttl", "should match")),
		Entry("a negative token ttl", created(kind("ClusterRegistrationToken", "negative-ttl", `{ttl: "-1h"}`), "spec.ttl", "should match")),
		Entry("a GitRepo without repo", created(kind("GitRepo", "no-repo", `{branch: main}`), "spec.repo", "Required value")),
		Entry("a GitRepo with an empty repo", created(kind("GitRepo", "empty-repo", `{repo: ""}`), "spec.repo", "at least 1 chars long")),
		Entry("a polling interval that is no duration", created(kind("GitRepo", "bad-interval", `{repo: "https://example.com/r.git", pollingInterval: often}`),
			"spec.pollingInterval", "should match")),
		Entry("an unknown field (strict validation)", created(kind("GitRepo", "unknown-field", `{repo: "https://example.com/r.git", repoo: x}`),
			`unknown field "spec.repoo"`)),
		Entry("a name that is no DNS subdomain", created(kind("GitRepo", "Bad_Name", `{repo: "https://example.com/r.git"}`),
			"metadata.name", "lowercase RFC 1123 subdomain")),
		Entry("a 60-character Helm release name", created(kind("Bundle", "long-release", `{helm: {releaseName: `+strings.Repeat("a", 60)+`}}`),
			"spec.helm.releaseName", "may not be more than 53")),
		Entry("a Helm release name with capitals", created(kind("Bundle", "upper-release", `{helm: {releaseName: MyRelease}}`),
			"spec.helm.releaseName", "should match")),
		Entry("a long release name in a target", created(kind("Bundle", "long-target-release", `{targets: [{name: t, helm: {releaseName: `+strings.Repeat("b", 60)+`}}]}`),
			"spec.targets[0].helm.releaseName", "may not be more than 53")),
		Entry("an unknown targetCustomizationMode", created(kind("Bundle", "bad-mode", `{targetCustomizationMode: Sometimes}`),
			"spec.targetCustomizationMode", "Unsupported value", "FirstMatch", "AllMatches")),
		Entry("an unknown resource encoding", created(kind("Bundle", "bad-encoding", `{resources: [{name: a.yaml, content: x, encoding: zip}]}`),
			"spec.resources[0].encoding", "Unsupported value")),
		Entry("Helm values that are a string", created(kind("Bundle", "values-string", `{helm: {values: "replicas: 2"}}`),
			"spec.helm.values", "must be of type object")),
		Entry("a negative Helm timeout", created(kind("Bundle", "negative-timeout", `{helm: {timeoutSeconds: -5}}`),
			"spec.helm.timeoutSeconds", "greater than or equal to 0")),
		Entry("a maxUnavailable that is no number or percentage", created(kind("Bundle", "bad-max-unavailable", `{rolloutStrategy: {maxUnavailable: ten}}`),
			"spec.rolloutStrategy.maxUnavailable", "should match")),
		Entry("a negative maxNew", created(kind("Bundle", "negative-max-new", `{rolloutStrategy: {maxNew: -1}}`),
			"spec.rolloutStrategy.maxNew", "greater than or equal to 0")),
		Entry("Cluster templateValues that are a list", created(kind("Cluster", "values-list", `{templateValues: [a, b]}`),
			"spec.templateValues", "must be of type object")),
		Entry("the healthy GitRepo patched with a polling interval that is no duration", patched(healthyGitRepo, `{"spec":{"pollingInterval":"often"}}`,
			"spec.pollingInterval", "should match")),
		Entry("the healthy GitRepo patched with an empty repo", patched(healthyGitRepo, `{"spec":{"repo":""}}`, "spec.repo")),
		Entry("the healthy GitRepo patched with an unknown field", patched(healthyGitRepo, `{"spec":{"brnch":"dev"}}`, `unknown field "spec.brnch"`)),
		Entry("a healthy Bundle patched with an unknown targetCustomizationMode", patched(healthyBundle, `{"spec":{"targetCustomizationMode":"Sometimes"}}`,
			"spec.targetCustomizationMode", "Unsupported value")),
		Entry("a healthy Cluster patched with templateValues that are a string", patched(healthyCluster, `{"spec":{"templateValues":"x"}}`,
			"spec.templateValues", "must be of type object")),
	)

	It("reports a ClusterGroup with an invalid selector on the group, and targets nothing with it", func() {
		group := &fleet.ClusterGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "broken-group", Namespace: ws},
			Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "env", Operator: "Near", Values: []string{"healthy"}}}}},
		}
		Expect(f.admin.Create(f.ctx, group)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(group), group)).To(Succeed())
			ready := conditionOf(group.Status.Conditions, fleet.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal("InvalidSelector"))
			g.Expect(ready.Message).To(containsAll("spec.selector", `"Near" is not a valid label selector operator`))
		}, timeout, poll).Should(Succeed())
		By("The group says: " + conditionOf(group.Status.Conditions, fleet.ConditionReady).Message)

		b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "by-broken-group", Namespace: ws}, Spec: fleet.BundleSpec{
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: cm}},
			Targets:   []fleet.BundleTarget{{Name: "group", ClusterGroup: "broken-group"}},
		}}
		Expect(f.admin.Create(f.ctx, b)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
			g.Expect(b.Status.ObservedGeneration).To(Equal(b.Generation))
		}, timeout, poll).Should(Succeed())
		Consistently(func() map[string]*fleet.BundleDeployment { return f.deploymentsOf(b.Name) }, time.Second, 200*time.Millisecond).
			Should(BeEmpty(), "a broken group selects no cluster")
		f.expectUndisturbed()
	})

	It("reports a BundleNamespaceMapping with invalid selectors on the Bundles of its namespace, and maps nothing", func() {
		const mappedWS = "mapping-ws"
		Expect(f.admin.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mappedWS}})).To(Succeed())
		Expect(f.admin.Create(f.ctx, &fleet.BundleNamespaceMapping{
			ObjectMeta:        metav1.ObjectMeta{Name: "broken-mapping", Namespace: mappedWS},
			BundleSelector:    &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ws}},
		})).To(Succeed())
		b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "mapped", Namespace: mappedWS, Labels: map[string]string{"app": "x"}}, Spec: fleet.BundleSpec{
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: cm}},
			Targets:   []fleet.BundleTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}},
		}}
		Expect(f.admin.Create(f.ctx, b)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
			ready := conditionOf(b.Status.Conditions, fleet.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Message).To(containsAll("BundleNamespaceMapping broken-mapping", "bundleSelector", `"Near" is not a valid label selector operator`))
		}, timeout, poll).Should(Succeed())
		By("The Bundle says: " + conditionOf(b.Status.Conditions, fleet.ConditionReady).Message)
		list := &fleet.BundleDeploymentList{}
		Expect(f.admin.List(f.ctx, list, client.MatchingLabels{fleet.BundleNamespaceLabel: mappedWS})).To(Succeed())
		Expect(list.Items).To(BeEmpty(), "the Bundle reached no cluster of the namespaces the broken mapping names")
		f.expectUndisturbed()
	})
}
