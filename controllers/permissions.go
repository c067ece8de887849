package controllers

// The rights of the manager process itself, beside its reconcilers': leader
// election, the Events every reconciler records through outcome, the namespaces it makes at start, and the ClusterRoles every
// agent is bound to (made once at start; to bind agents to them the manager
// must hold what they grant, which the reconcilers' rules cover).
//
// The dashboard (--dashboard-bind-address) checks its users' tokens and rights.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundledeployments/status,verbs=update;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;create;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
