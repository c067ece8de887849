package dump

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/diagnose"
	"github.com/gitfleet/fleet/internal/target"
)

func sample() *Archive {
	taken := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	s := diagnose.Snapshot{
		Taken: taken,
		Clusters: []fleet.Cluster{{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "a"},
			Status: fleet.ClusterStatus{Display: fleet.ClusterDisplay{State: fleet.ClusterStateOffline}}}},
		Bundles: []fleet.Bundle{{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "b"},
			Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "secret.yaml", Content: "kind: Secret\ndata:\n  password: aHVudGVyMg==\n"}}}}},
		Registrations: []fleet.ClusterRegistration{{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "r"},
			Status: fleet.ClusterRegistrationStatus{SealedCredential: "c2VhbGVk"}}},
		Unreadable: []string{diagnose.KindToken},
	}
	Scrub(&s)
	return &Archive{Snapshot: s, Events: []corev1.Event{{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "e"},
		InvolvedObject: corev1.ObjectReference{Kind: "Cluster", Namespace: "fleet-default", Name: "a"}, Reason: "StateChanged"}},
		Metrics: []byte("fleet_clusters{namespace=\"fleet-default\",state=\"Offline\"} 1\n")}
}

func TestRoundTripKeepsFindingsAndNoSecretData(t *testing.T) {
	g := NewWithT(t)
	a := sample()
	var buf bytes.Buffer
	g.Expect(a.Write(&buf, "test")).To(Succeed())
	g.Expect(buf.String()).NotTo(ContainSubstring("aHVudGVyMg=="))
	back, err := Read(bytes.NewReader(buf.Bytes()), "x.tgz")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Snapshot.Taken.Equal(a.Snapshot.Taken)).To(BeTrue())
	g.Expect(back.Snapshot.Clusters).To(HaveLen(1))
	g.Expect(back.Snapshot.Bundles[0].Spec.Resources[0].Content).To(Equal(Redacted))
	g.Expect(back.Snapshot.Registrations[0].Status.SealedCredential).To(Equal(Redacted))
	g.Expect(back.Events).To(HaveLen(1))
	g.Expect(string(back.Metrics)).To(ContainSubstring("fleet_clusters"))
	f1, s1 := diagnose.Analyze(&a.Snapshot, diagnose.Options{})
	f2, s2 := diagnose.Analyze(&back.Snapshot, diagnose.Options{})
	g.Expect(f1).NotTo(BeEmpty())
	g.Expect(f2).To(Equal(f1))
	g.Expect(s2).To(Equal(s1))
}

func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBadArchives(t *testing.T) {
	var good bytes.Buffer
	if err := sample().Write(&good, "test"); err != nil {
		t.Fatal(err)
	}
	truncated := good.Bytes()[:good.Len()/2]
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"not gzip", []byte("apiVersion: v1\nkind: List\n"), "x.tgz: not a fleet dump archive (a gzipped tar, as fleet dump writes)"},
		{"truncated", truncated, "x.tgz: corrupt archive"},
		{"foreign tar", tarGz(t, map[string]string{"etc/hosts": "127.0.0.1 localhost\n"}), "x.tgz: not a fleet dump archive: it has no fleet-dump/manifest.json"},
		{"other format", tarGz(t, map[string]string{"fleet-dump/manifest.json": `{"format":"other/v9"}`}), `x.tgz: fleet-dump/manifest.json: format "other/v9"`},
		{"bad object", tarGz(t, map[string]string{
			"fleet-dump/manifest.json": `{"format":"` + Format + `"}`,
			"fleet-dump/clusters.yaml": "apiVersion: v1\nkind: List\nitems:\n- kind: Cluster\n  metadata: {namespace: ws, name: c1}\n  spec: {paused: \"yes\"}\n",
		}), "x.tgz: fleet-dump/clusters.yaml: item 1 (Cluster ws/c1)"},
		{"bad yaml", tarGz(t, map[string]string{
			"fleet-dump/manifest.json": `{"format":"` + Format + `"}`,
			"fleet-dump/clusters.yaml": "apiVersion: v1\nkind: List\nitems:\n  - a\n - b\n",
		}), "x.tgz: fleet-dump/clusters.yaml: error converting YAML to JSON: yaml: line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Read(bytes.NewReader(tc.data), "x.tgz")
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// TestValuesFindingReadsBackFromTheArchive: the values check re-renders
// a deployment's options from the Bundle, Cluster and ClusterGroups the
// archive holds (their resources left out), so a dump finds what the live
// fleet found.
func TestValuesFindingReadsBackFromTheArchive(t *testing.T) {
	g := NewWithT(t)
	values := func(tier string, n int) *fleet.GenericMap {
		return &fleet.GenericMap{Data: map[string]interface{}{"tier": tier, "replicas": n, "nested": map[string]interface{}{"ratio": 0.5}}}
	}
	b := fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "app", Generation: 3},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: values("bronze", 2)}},
			Resources:               []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\n"}},
			Targets: []fleet.BundleTarget{
				{Name: "eu", ClusterGroup: "eu", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: values("gold", 3)}}},
				{Name: "all", ClusterSelector: &metav1.LabelSelector{}},
			}},
		Status: fleet.BundleStatus{ObservedGeneration: 3}}
	taken := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	c := fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "a", CreationTimestamp: metav1.NewTime(taken.Add(-time.Hour))},
		Status: fleet.ClusterStatus{Display: fleet.ClusterDisplay{State: "Ready"}, Agent: fleet.AgentStatus{LastSeen: metav1.NewTime(taken.Add(-time.Minute))}}}
	cb, err := target.Compile(&b)
	g.Expect(err).NotTo(HaveOccurred())
	d, ok, err := target.NewTargeter(cb, "s-content").Target(&c, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	bd := fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-a", Name: "app", Labels: map[string]string{
		fleet.BundleNameLabel: "app", fleet.BundleNamespaceLabel: "fleet-default", fleet.ClusterLabel: "a", fleet.ClusterNamespaceLabel: "fleet-default"}},
		Spec:   fleet.BundleDeploymentSpec{DeploymentID: d.ID, StagedDeploymentID: d.ID, Options: *d.Options, StagedOptions: *d.Options},
		Status: fleet.BundleDeploymentStatus{AppliedDeploymentID: d.ID, Ready: true, NonModified: true}}
	// The cluster joins group eu after the manager rendered it.
	c.Labels = map[string]string{"region": "eu"}
	group := fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "eu"},
		Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}}}
	s := diagnose.Snapshot{Taken: taken, Clusters: []fleet.Cluster{c}, ClusterGroups: []fleet.ClusterGroup{group},
		Bundles: []fleet.Bundle{b}, BundleDeployments: []fleet.BundleDeployment{bd}}
	Scrub(&s)
	live, _ := diagnose.Analyze(&s, diagnose.Options{})
	g.Expect(live).To(HaveLen(1))
	g.Expect(live[0].Check).To(Equal(diagnose.CheckValuesDiffer))
	g.Expect(live[0].Message).To(And(ContainSubstring(`helm.values.tier: held "bronze", now "gold"`), ContainSubstring(`helm.values.replicas: held 2, now 3`)))

	var buf bytes.Buffer
	g.Expect((&Archive{Snapshot: s}).Write(&buf, "test")).To(Succeed())
	back, err := Read(bytes.NewReader(buf.Bytes()), "x.tgz")
	g.Expect(err).NotTo(HaveOccurred())
	offline, _ := diagnose.Analyze(&back.Snapshot, diagnose.Options{})
	g.Expect(offline).To(Equal(live))

	why := "and a healthy deployment stays healthy through the archive (numbers and nested values hash alike after YAML)"
	s.Clusters[0].Labels = nil
	buf.Reset()
	g.Expect((&Archive{Snapshot: s}).Write(&buf, "test")).To(Succeed(), why)
	back, err = Read(bytes.NewReader(buf.Bytes()), "x.tgz")
	g.Expect(err).NotTo(HaveOccurred())
	offline, _ = diagnose.Analyze(&back.Snapshot, diagnose.Options{})
	g.Expect(offline).To(BeEmpty(), why)
}
