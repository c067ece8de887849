package v1alpha1

// Sharding, as Fleet shards its controllers: several managers share one
// management cluster, each serving the GitRepos, HelmOps and Bundles (and
// the BundleDeployments made from them) labelled with its shard ID, the
// default shard (a manager started without one) those labelled with none.
const (
	// ShardRefLabel, on a GitRepo, HelmOp, Bundle or BundleDeployment,
	// names the shard whose manager handles it. The manager copies it from
	// a GitRepo or HelmOp to its Bundles, and from a Bundle to its
	// BundleDeployments.
	ShardRefLabel = "fleet.cattle.io/shard-ref"
	// ShardIDLabel, on a manager's pods, is the shard it serves ("" for the
	// default shard).
	ShardIDLabel = "fleet.cattle.io/shard-id"
	// ShardDefaultLabel is "true" on the pods of the manager of the
	// default shard.
	ShardDefaultLabel = "fleet.cattle.io/shard-default"
)
