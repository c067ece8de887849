package capi

// The manager's rights this reconciler needs, collected by `make generate`
// into config/rbac/role.yaml (the ClusterRole fleet-manager).
//
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clustergroups,verbs=get;list;watch;create;patch
//
// Enrolment sets the agent's namespace, host network and tolerations of the
// Clusters it makes; the admission policy fleet-cluster-agent-settings lets
// only holders of this verb set them (internal/install).
//
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters,verbs=configure-agent
// +kubebuilder:rbac:groups="",resources=secrets;namespaces,verbs=get;list;watch
