package clusterimport

// The manager's rights this reconciler needs, collected by `make generate`
// into config/rbac/role.yaml (the ClusterRole fleet-manager).
//
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusterregistrationtokens,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusterregistrations,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundledeployments,verbs=get;list;watch;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundles,verbs=get;list;watch
//
// The local Cluster's agent is installed into the manager's own cluster
// through rights `fleet install controller` grants in the manager's
// namespace only (the Role fleet-manager-local-agent); its ServiceAccount
// and cluster-admin binding come with the install, so the manager itself
// never needs to bind cluster-admin.
