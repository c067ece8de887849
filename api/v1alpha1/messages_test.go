package v1alpha1

import (
	"testing"

	. "github.com/onsi/gomega"
)

// Messages about resources read as Fleet's do, since Fleet's UI, its users'
// alerts and its tests match on them (Fleet's ModifiedStatus.String and
// NonReadyStatus.String).
func TestResourceMessagesInFleetsWords(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ModifiedStatus{APIVersion: "batch/v1", Kind: "Job", Namespace: "default", Name: "x", Create: true}.String()).
		To(Equal("job.batch default/x missing"))
	g.Expect(ModifiedStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "x", Delete: true}.String()).
		To(Equal("configmap.v1 default/x extra"))
	g.Expect(ModifiedStatus{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "r", Patch: `{"rules":null}`}.String()).
		To(Equal(`clusterrole.rbac.authorization.k8s.io r modified {"rules":null}`))
	g.Expect(ModifiedStatus{Kind: "ConfigMap", Namespace: "ns", Name: "x", Create: true}.String()).
		To(Equal("configmap ns/x missing"), "no API version, no group")
	g.Expect(NonReadyStatus{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web",
		Summary: Summary{State: "updating", Transitioning: true, Message: []string{"0/1 available"}}}.String()).
		To(Equal("deployment.apps default/web 0/1 available"))
}
