// Package deployer turns a BundleDeployment into a Helm release in the
// agent's own cluster. It links Helm's SDK and Kustomize, so it runs in the
// fleet-agent-deploy binary, one operation per process (Serve), never in the
// resident fleet-agent (see agent/deployrpc).
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
// the release's storage Secret carries the labels fleet.ManagedLabel and
// fleet.ClusterNamespaceLabel, and the chart's annotations (named in
// api/v1alpha1/wire.go) carry the BundleDeployment's name, deploymentID and
// removal options. The agent may not
// write BundleDeployments (so it cannot use finalizers); it finds releases
// whose BundleDeployment is gone from these records and uninstalls them.
//
// Deploy fails with an outcome.Stalling error when the bundle's author must
// change something (files that make no chart, values that cannot be read, a
// chart that does not render, objects the API server rejects), and with a
// plain error when retrying may help (IsTransient): the reconciler reports
// the first and stops, and backs off on the second.
//
// Everything that needs no cluster (building charts, forcing namespaces,
// merging values) is a pure function, tested without an API server.
package deployer
