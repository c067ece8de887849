// Package ocistorage keeps bundle contents in an OCI registry instead of
// etcd, as Fleet's OCI storage does: the manager pushes a bundle's content
// as an artifact whose one layer is the content's manifest (the JSON
// content.Manifest), gzipped as a Content holds it, in the repository named
// after the content ("s-" + the manifest's sha256). The agent resolves the
// artifact's tag, pulls its layer with the credentials the manager put next
// to its BundleDeployment, unpacks it, and checks the manifest's sha256
// against the content's name before use. Layers pushed uncompressed (before
// compression) are still read.
//
// Both sides share this package: the Secret format (Fleet's keys, in
// api/v1alpha1), the repository path of a content (the Secret's reference
// + "/" + the content name, tagged "latest", as Fleet names it), push and
// pull.
package ocistorage
