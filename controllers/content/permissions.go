package content

// The manager's rights this reconciler needs, collected by `make generate`
// into config/rbac/role.yaml (the ClusterRole fleet-manager).
//
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=contents,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=contents/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundledeployments,verbs=get;list;watch
