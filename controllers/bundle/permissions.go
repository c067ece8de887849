package bundle

// The manager's rights this reconciler needs, collected by `make generate`
// into config/rbac/role.yaml (the ClusterRole fleet-manager).
//
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundles,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundles/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundledeployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=contents,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters;clustergroups;bundlenamespacemappings;policies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundles/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update;delete
