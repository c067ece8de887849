package bundledeployment

import (
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// What the agent writes stays within the schema's bounds, however large
// the release or the errors it met.
func TestBoundStatus(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("é", 40000) // two bytes each
	st := fleet.BundleDeploymentStatus{
		Conditions: []metav1.Condition{{Type: fleet.ConditionDeployed, Message: long}},
		Display:    fleet.BundleDeploymentDisplay{Deployed: long},
	}
	for range 2 * fleet.MaxStatusResources {
		st.Resources = append(st.Resources, fleet.BundleDeploymentResource{Kind: "ConfigMap", APIVersion: "v1", Name: "cm"})
	}
	for range 3 * fleet.MaxStatusEntries {
		st.NonReadyStatus = append(st.NonReadyStatus, fleet.NonReadyStatus{Kind: "Deployment", Name: "d",
			Summary: fleet.Summary{Message: make([]string, 2*fleet.MaxSummaryMessages)}})
		st.ModifiedStatus = append(st.ModifiedStatus, fleet.ModifiedStatus{Kind: "ConfigMap", Name: "cm", Patch: long})
	}
	BoundStatus(&st)

	g.Expect(st.Resources).To(HaveLen(fleet.MaxStatusResources))
	g.Expect(st.NonReadyStatus).To(HaveLen(fleet.MaxStatusEntries))
	g.Expect(st.ModifiedStatus).To(HaveLen(fleet.MaxStatusEntries))
	g.Expect(st.IncompleteState).To(BeTrue())
	msgs := st.NonReadyStatus[0].Summary.Message
	g.Expect(msgs).To(HaveLen(fleet.MaxSummaryMessages))
	g.Expect(msgs[len(msgs)-1]).To(Equal("... and 11 more"))
	for _, s := range []struct {
		got string
		max int
	}{
		{st.Conditions[0].Message, fleet.MaxStatusMessageLength},
		{st.Display.Deployed, fleet.MaxStatusMessageLength},
		{st.ModifiedStatus[0].Patch, fleet.MaxStatusPatchLength},
	} {
		g.Expect(len(s.got)).To(BeNumerically("<=", s.max))
		g.Expect(utf8.ValidString(s.got)).To(BeTrue())
		g.Expect(s.got).To(MatchRegexp(`^é+ \.\.\. \(\d+ more bytes\)$`))
	}
	g.Expect(st.ModifiedStatus[0].Patch).To(HaveSuffix("(75927 more bytes)"), "80000 bytes, 4073 kept")

	small := fleet.BundleDeploymentStatus{Release: "ns/web:1", Resources: []fleet.BundleDeploymentResource{{Kind: "ConfigMap", Name: "a"}}}
	want := *small.DeepCopy()
	BoundStatus(&small)
	g.Expect(small).To(Equal(want), "a status within the bounds is left as it is")
}
