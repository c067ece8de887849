package gitrepo

import (
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
)

// bundleLabels are the labels the Bundles of repo carry besides fleet.yaml's,
// as Fleet gives them: the GitRepo's own labels, so that a
// BundleNamespaceMapping or a dependsOn selector can pick a GitRepo's
// Bundles by the labels set on it, and fleet.cattle.io/repo-name. Labels of
// fleet.cattle.io and its subdomains are left out but that one: a tenant may
// set them on its GitRepo, and on a Bundle they stand for the manager's word
// (names.ReservedLabelKey). The GitRepo's shard (fleet.cattle.io/shard-ref)
// is passed on, as Fleet passes it, so that its Bundles and their
// BundleDeployments are handled by the manager of the same shard.
func bundleLabels(repo *fleet.GitRepo) map[string]string {
	out := make(map[string]string, len(repo.Labels)+1)
	for k, v := range repo.Labels {
		if !names.ReservedLabelKey(k) {
			out[k] = v
		}
	}
	out[fleet.RepoLabel] = repo.Name
	if shard, ok := repo.Labels[fleet.ShardRefLabel]; ok {
		out[fleet.ShardRefLabel] = shard
	}
	return out
}
