package notification

// The manager's rights this reconciler needs, collected by `make generate`
// into config/rbac/role.yaml (the ClusterRole fleet-manager). Secrets are
// read one by one, by the name a Notification gives, in its own namespace;
// their metadata is watched (the manager's one metadata watch of Secrets).
//
// +kubebuilder:rbac:groups=notification.gitfleet.io,resources=notifications,verbs=get;list;watch
// +kubebuilder:rbac:groups=notification.gitfleet.io,resources=notifications/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=gitrepos;helmops;bundles,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
