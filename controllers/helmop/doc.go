// Package helmop reconciles HelmOps: like the GitRepo controller, it is the
// first stage of the two-stage pull, but its source is a Helm chart
// repository, an OCI registry or a chart URL instead of git. Each HelmOp
// becomes one Bundle of the same name in its namespace, labelled
// fleet.cattle.io/fleet-helm-name and owned by it, which the bundle
// controller then targets at clusters as it does a GitRepo's.
//
// The manager resolves helm.version (an exact version or a semver
// constraint) against the repository's index.yaml or the registry's tags,
// so every cluster gets the same version, and so does each target naming a
// chart of its own. By default, as in Fleet, the Bundle then holds no
// chart: helm.version is the resolved version and spec.helmOpOptions
// (secretName: helmSecretName, insecureSkipTLSVerify) tell the bundle
// controller to copy that Secret next to each BundleDeployment and each
// agent to download the chart itself; the manager reads only the index (or
// the tags), with the helmSecretName credentials sent only to the host of
// the chart's URL. With ChartsInBundle (the manager's
// --helmop-charts-in-bundle) the manager fetches the chart and puts it in
// the Bundle, exactly as a fleet.yaml naming a remote chart is read
// (internal/bundlereader): agents never reach chart repositories, and no
// Secret is copied anywhere.
//
// As in Fleet, a HelmOp whose pollingInterval is set (not "0") and whose
// version is a constraint is polled: at each interval the constraint is
// resolved again, and when it names a newer version the Bundle is rewritten
// with it, so agents upgrade the release in place. Without polling the
// version is resolved when the spec changes (and once after the manager
// starts). The GitRepoRestrictions of the namespace apply as to a GitRepo.
// The HelmOps of one namespace hold at most half of the download slots
// (Workers) at once, so one tenant's hanging repository cannot stall the
// others'.
//
// Bad input (invalid helm options, a constraint that does not parse, a
// chart or version the repository lacks, a missing Secret, a restriction
// broken, a Bundle of that name owned by someone else) sets Accepted False
// with a Reason of api/v1alpha1 and leaves the Bundle as it was; an
// unreachable repository is retried with backoff. Status is computed once
// per reconcile and patched when it changed: version, lastPollingTriggered,
// the Accepted, Polled and Ready conditions, the Bundle's summary in the
// shape of a GitRepo's status, and resources and resourceCounts computed
// (internal/summary) from the Bundle's BundleDeployments, read through a
// cache index on their fleet.cattle.io/fleet-helm-name label and followed
// with a coalesced watch. A finalizer deletes the Bundle before the HelmOp
// goes.
package helmop
