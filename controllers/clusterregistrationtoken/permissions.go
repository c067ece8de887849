package clusterregistrationtoken

// The manager's rights this reconciler needs, collected by `make generate`
// into config/rbac/role.yaml (the ClusterRole fleet-manager).
//
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusterregistrationtokens,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusterregistrationtokens/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusterregistrationtokens/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusterregistrations,verbs=create
