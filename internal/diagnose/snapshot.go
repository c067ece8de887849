package diagnose

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Snapshot is what the checks look at: the fleet's objects at one time.
type Snapshot struct {
	// Taken is when the objects were read; the checks measure ages from it.
	Taken             time.Time
	Clusters          []fleet.Cluster
	ClusterGroups     []fleet.ClusterGroup
	Bundles           []fleet.Bundle
	BundleDeployments []fleet.BundleDeployment
	GitRepos          []fleet.GitRepo
	HelmOps           []fleet.HelmOp
	Tokens            []fleet.ClusterRegistrationToken
	Registrations     []fleet.ClusterRegistration
	// Leases are the agents' check-in Leases (fleet.AgentLeaseName).
	Leases []coordinationv1.Lease
	// CAPIClusters are Cluster API's Clusters (cluster.x-k8s.io), with
	// their metadata, spec.paused and status phase, conditions and
	// initialization only.
	CAPIClusters []clusterv1.Cluster
	// Unreadable names the kinds the reader was not allowed to list; checks
	// over them found nothing, and Analyze says so.
	Unreadable []string
	// Absent names the kinds the API server does not serve (Cluster API not
	// installed) or an archive does not hold; checks over them are not run.
	Absent []string
}
