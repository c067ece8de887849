package schedule

// The manager's rights this reconciler needs, collected by `make generate`
// into config/rbac/role.yaml (the ClusterRole fleet-manager).
//
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=schedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=schedules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clustergroups,verbs=get;list;watch
