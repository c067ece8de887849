package clusterregistration

// The manager's rights this reconciler needs, collected by `make generate`
// into config/rbac/role.yaml (the ClusterRole fleet-manager).
//
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusterregistrations,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusterregistrations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusterregistrationtokens,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings;clusterroles;clusterrolebindings,verbs=get;list;watch;create;update;patch;delete
