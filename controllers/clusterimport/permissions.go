package clusterimport

// The manager's rights this reconciler needs, collected by `make generate`
// into config/rbac/role.yaml (the ClusterRole fleet-manager).
//
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusterregistrationtokens,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusterregistrations,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
//
// The local Cluster's agent is installed into the manager's own cluster with
// the manager's own rights (LocalCluster): what agentinstall applies there
// by server-side apply (which needs create, patch and, to read the
// Deployment back, get), and the binding of the agent's ServiceAccount to
// cluster-admin, which the API server allows only to whoever may bind that
// one ClusterRole.
//
// +kubebuilder:rbac:groups="",resources=namespaces;serviceaccounts;configmaps;secrets,verbs=get;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=get;create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=cluster-admin
