// Package api_test checks the generated CRDs against a real API server: every
// sample in config/samples is accepted, and bad values are refused by the server
// itself with a message that names the field.
package api_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gitfleet/fleet/test/controlplane"
)

var cl client.Client

func TestMain(m *testing.M) {
	cp, err := controlplane.Start(controlplane.Options{Name: "api"})
	if err != nil {
		panic(err)
	}
	cl, err = cp.Client(nil)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = cp.Stop()
	os.Exit(code)
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	err := cl.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

func TestSamplesAreAccepted(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ensureNamespace(t, "fleet-default")

	files, err := filepath.Glob("../../config/samples/*.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	kinds := map[string]bool{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		raw, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		for _, doc := range strings.Split(string(raw), "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			u := &unstructured.Unstructured{}
			g.Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed(), f)
			// Strict field validation: a sample with a field the schema does not
			// know is a broken sample, not a pruned one.
			g.Expect(cl.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed(), "%s: %s", f, u.GetKind())
			kinds[u.GetKind()] = true
		}
	}
	g.Expect(kinds).To(HaveLen(10), "config/samples must hold one object of every kind")
}

func TestBadValuesAreRejected(t *testing.T) {
	ensureNamespace(t, "fleet-default")
	cases := []struct {
		name string
		obj  string
		msg  []string
	}{{
		name: "ttl is not a duration",
		obj: `apiVersion: fleet.cattle.io/v1alpha1
kind: ClusterRegistrationToken
metadata: {name: bad-ttl, namespace: fleet-default}
spec: {ttl: "1 week"}`,
		msg: []string{"spec.ttl", "should match"},
	}, {
		name: "polling interval is not a duration",
		obj: `apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata: {name: bad-interval, namespace: fleet-default}
spec: {repo: "https://example.com/r.git", pollingInterval: "often"}`,
		msg: []string{"spec.pollingInterval", "should match"},
	}, {
		name: "release name longer than 53 characters",
		obj: `apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata: {name: bad-release, namespace: fleet-default}
spec:
  helm: {releaseName: "` + strings.Repeat("a", 60) + `"}`,
		msg: []string{"spec.helm.releaseName", "53"},
	}, {
		name: "unknown target customization mode",
		obj: `apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata: {name: bad-mode, namespace: fleet-default}
spec: {targetCustomizationMode: Sometimes}`,
		msg: []string{"spec.targetCustomizationMode", "Unsupported value", "FirstMatch", "AllMatches"},
	}, {
		name: "unknown resource encoding",
		obj: `apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata: {name: bad-encoding, namespace: fleet-default}
spec:
  resources: [{name: a.yaml, content: x, encoding: zip}]`,
		msg: []string{"encoding", "Unsupported value"},
	}, {
		name: "GitRepo without repo",
		obj: `apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata: {name: no-repo, namespace: fleet-default}
spec: {branch: main}`,
		msg: []string{"spec.repo", "Required"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			u := &unstructured.Unstructured{}
			g.Expect(yaml.Unmarshal([]byte(tc.obj), &u.Object)).To(Succeed())
			err := cl.Create(context.Background(), u)
			g.Expect(err).To(HaveOccurred(), "the API server accepted %s", tc.name)
			for _, m := range tc.msg {
				g.Expect(err.Error()).To(ContainSubstring(m))
			}
			t.Logf("Rejected: %v", err)
		})
	}
}
