package helmop

// The manager's rights this reconciler needs, collected by `make generate`
// into config/rbac/role.yaml (the ClusterRole fleet-manager).
//
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=helmops,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=helmops/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=helmops/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=gitreporestrictions;policies,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundles,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundledeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
