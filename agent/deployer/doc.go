// Package deployer turns a BundleDeployment into a Helm release in the
// agent's own cluster.
//
// A BundleDeployment names a Content (its deploymentID is
// "<contentName>:<options hash>"); the Content holds the bundle's files. This
// package verifies and unpacks them (content.go), works out the bundle's
// style, a Helm chart, a Kustomize directory or plain manifests, and builds a
// chart from it (chart.go, manifests.go, kustomize.go), merges the values
// (values.go), and installs or upgrades one release per BundleDeployment with
// the Helm SDK (helm.go). A post-renderer (postrender.go) forces namespaces
// and labels every object with its release, so the monitor can find the
// objects, and extra ones, again.
//
// What was deployed is recorded downstream only, in the Helm release itself:
// the release's storage Secret carries the labels ManagedLabel and
// ClusterNamespaceLabel, and the chart's annotations carry the
// BundleDeployment's name, deploymentID and removal options. The agent may not
// write BundleDeployments (so it cannot use finalizers); it finds releases
// whose BundleDeployment is gone from these records and uninstalls them.
//
// Everything that needs no cluster (building charts, forcing namespaces,
// merging values) is a pure function, tested without an API server.
package deployer
