package secretmeta

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Metadata is anyone's to write who may write Secrets: what the watch keeps
// of it is bounded, whatever a tenant puts there.
func TestStripKeepsBoundedMetadata(t *testing.T) {
	g := NewWithT(t)
	big := strings.Repeat("x", 200<<10)
	labels := map[string]string{fleet.ManagedLabel: "true", fleet.RegistrationTokenLabel: strings.Repeat("t", MaxKeptValue+1)}
	for i := range 1000 {
		labels["tenant.example/l"+strings.Repeat("x", 40)+string(rune('a'+i%26))+strings.Repeat("y", i%60)] = strings.Repeat("v", 63)
	}
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "s", Namespace: "tenant", UID: "uid", ResourceVersion: "7",
		Labels: labels,
		Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": big,
			fleet.CredentialIssuedAtAnnotation:                 "2026-01-02T03:04:05Z",
			fleet.CredentialServiceAccountAnnotation:           big,
		},
		Finalizers:      []string{big},
		OwnerReferences: []metav1.OwnerReference{{Name: big}},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: big}},
	}}
	out, err := strip(in)
	g.Expect(err).NotTo(HaveOccurred())
	m := out.(*metav1.PartialObjectMetadata)
	g.Expect(m.Name).To(Equal("s"))
	g.Expect(m.Namespace).To(Equal("tenant"))
	g.Expect(string(m.UID)).To(Equal("uid"))
	g.Expect(m.ResourceVersion).To(Equal("7"))
	g.Expect(m.Labels).To(Equal(map[string]string{fleet.ManagedLabel: "true"}), "only the labels the manager reads, of bounded length")
	g.Expect(m.Annotations).To(Equal(map[string]string{fleet.CredentialIssuedAtAnnotation: "2026-01-02T03:04:05Z"}))
	g.Expect(m.Finalizers).To(BeEmpty())
	g.Expect(m.OwnerReferences).To(BeEmpty())
	g.Expect(m.ManagedFields).To(BeEmpty())
}

func TestStripKeepsNothingUnasked(t *testing.T) {
	g := NewWithT(t)
	out, err := strip(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"a": "b"}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*metav1.PartialObjectMetadata).Labels).To(BeNil())
}
