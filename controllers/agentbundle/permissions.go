package agentbundle

// The manager's rights this reconciler needs, collected by `make generate`
// into config/rbac/role.yaml (the ClusterRole fleet-manager).
//
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundles,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundledeployments,verbs=get;list;watch
