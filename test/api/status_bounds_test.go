package api_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/config/crd"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/internal/install"
)

// The BundleDeployment's schema holds the bounds that the agent cuts its
// status to (api/v1alpha1 MaxStatus...): the markers and the constants say
// the same numbers.
func TestBundleDeploymentStatusBounds(t *testing.T) {
	g := NewWithT(t)
	crds, err := crd.CRDs()
	g.Expect(err).NotTo(HaveOccurred())
	var status apiextensionsv1.JSONSchemaProps
	for _, c := range crds {
		if c.Name == "bundledeployments.fleet.cattle.io" {
			status = c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
		}
	}
	g.Expect(status.Properties).NotTo(BeEmpty(), "no BundleDeployment status schema")
	maxItems := func(p apiextensionsv1.JSONSchemaProps) int64 {
		g.Expect(p.MaxItems).NotTo(BeNil())
		return *p.MaxItems
	}
	maxLength := func(p apiextensionsv1.JSONSchemaProps) int64 {
		g.Expect(p.MaxLength).NotTo(BeNil())
		return *p.MaxLength
	}
	props := status.Properties
	g.Expect(maxItems(props["conditions"])).To(BeEquivalentTo(fleet.MaxStatusConditions))
	g.Expect(maxLength(props["conditions"].Items.Schema.Properties["message"])).To(BeEquivalentTo(fleet.MaxStatusMessageLength))
	g.Expect(maxItems(props["nonReadyStatus"])).To(BeEquivalentTo(fleet.MaxStatusEntries))
	g.Expect(maxItems(props["modifiedStatus"])).To(BeEquivalentTo(fleet.MaxStatusEntries))
	g.Expect(maxItems(props["resources"])).To(BeEquivalentTo(fleet.MaxStatusResources))
	g.Expect(maxLength(props["release"])).To(BeEquivalentTo(fleet.MaxStatusShortLength))
	g.Expect(maxLength(props["appliedDeploymentID"])).To(BeEquivalentTo(fleet.MaxStatusShortLength))
	display := props["display"].Properties
	g.Expect(maxLength(display["deployed"])).To(BeEquivalentTo(fleet.MaxStatusMessageLength))
	g.Expect(maxLength(display["monitored"])).To(BeEquivalentTo(fleet.MaxStatusMessageLength))
	g.Expect(maxLength(display["state"])).To(BeEquivalentTo(fleet.MaxStatusShortLength))
	modified := props["modifiedStatus"].Items.Schema.Properties
	g.Expect(maxLength(modified["patch"])).To(BeEquivalentTo(fleet.MaxStatusPatchLength))
	nonReady := props["nonReadyStatus"].Items.Schema.Properties
	g.Expect(maxLength(nonReady["uid"])).To(BeEquivalentTo(fleet.MaxStatusShortLength))
	summary := nonReady["summary"].Properties
	g.Expect(maxLength(summary["state"])).To(BeEquivalentTo(fleet.MaxStatusShortLength))
	g.Expect(maxItems(summary["message"])).To(BeEquivalentTo(fleet.MaxSummaryMessages))
	g.Expect(maxLength(*summary["message"].Items.Schema)).To(BeEquivalentTo(fleet.MaxSummaryMessageLength))
	for _, entry := range []map[string]apiextensionsv1.JSONSchemaProps{modified, nonReady, props["resources"].Items.Schema.Properties} {
		g.Expect(maxLength(entry["kind"])).To(BeEquivalentTo(fleet.MaxStatusShortLength))
		g.Expect(maxLength(entry["apiVersion"])).To(BeEquivalentTo(fleet.MaxAPIVersionLength))
		g.Expect(maxLength(entry["namespace"])).To(BeEquivalentTo(fleet.MaxNamespaceLength))
		g.Expect(maxLength(entry["name"])).To(BeEquivalentTo(fleet.MaxNameLength))
	}
}

// The admission policy on Cluster API Clusters names the annotations and
// variables the Cluster API enrollment reads.
func TestCAPIAgentSettingsPolicyNames(t *testing.T) {
	g := NewWithT(t)
	g.Expect(install.CAPIAgentSettingsAnnotations).To(ConsistOf(capi.AgentNamespaceAnnotation, capi.HostNetworkAnnotation, capi.AgentTolerationsAnnotation))
	g.Expect(install.CAPIAgentSettingsVariables).To(ConsistOf(capi.HostNetworkVariable, capi.AgentTolerationsVariable))
}
