package agentbundle

// +kubebuilder:rbac:groups=fleet.cattle.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundles,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=fleet.cattle.io,resources=bundledeployments,verbs=get;list;watch
