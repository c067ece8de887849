// Package ocistorage keeps bundle contents in an OCI registry instead of
// etcd, as Fleet's OCI storage does: the manager pushes a bundle's content
// as an artifact whose one layer is the content's manifest (the JSON
// content.Manifest, uncompressed), so that the layer's digest is the
// content's own name ("s-" + sha256) and every BundleDeployment already
// names the digest to pull. The agent pulls that blob by digest with the
// credentials the manager put next to its BundleDeployment, and checks the
// digest again before use.
//
// Both sides share this package: the Secret format (Fleet's keys, in
// api/v1alpha1), the repository path of a content (the Secret's reference
// + "/" + the content name, tagged "latest", as Fleet names it), push and
// pull.
package ocistorage
