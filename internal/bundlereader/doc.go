// Package bundlereader turns a directory tree, a git checkout or the paths
// given to `fleet apply`, into Bundles, the way Rancher Fleet does, so that
// repositories written for Fleet produce the same Bundles here.
//
// Read expands each path (globs, a leading "/" for the root) and finds the
// bundle directories below it by Fleet's rule (every directory with a
// fleet.yaml or fleet.yml; the path itself also when it, or a sub-directory
// not below a fleet.yaml, holds a .yaml or .yml file); ReadDriven takes the
// bundles a GitRepo's spec.bundles names instead (Fleet's driven scan). Each
// bundle gets its name, labels, deployment options and targets from its
// fleet.yaml (or options file) and the GitRepo, and its files as resources:
// every file below its directory but hidden ones, its fleet.yaml, its values
// files and what .fleetignore lists, as Fleet ships them, so a sub-directory
// that is a bundle of its own rides along in its parent (the agent deploys
// its manifests with its own bundle only) and a chart's .helmignore leaves
// nothing out. Remote Helm charts are fetched at read time and carried as
// resources, so the agent needs no network path to the chart repository,
// and helm.valuesFiles are merged into helm.values (a bundle's own only when
// it names a chart, as in Fleet).
//
// fleet.yaml is read as Fleet reads it: every field Fleet knows is accepted.
// A key no field takes, and a Fleet field not implemented here (see
// ignoredFields), is ignored with a Warning, passed to Options.Warn: the
// GitRepo controller shows them in a Warning condition, `fleet apply` on
// standard error. Values Fleet would refuse (a wrong type, an invalid label
// selector) are errors.
//
// An error that a change to the files or fleet.yaml must fix (a malformed
// fleet.yaml, a path outside the repository, a chart version that does not
// exist) is an outcome.Stalling error with fleet.ReasonInvalidBundle whose
// message names the file and, where it can, the line; any other error (an
// unreachable chart repository) is transient.
//
// Both the GitRepo controller (on each new commit) and the `fleet apply`
// command use this package; neither needs a cluster to read bundles.
package bundlereader
