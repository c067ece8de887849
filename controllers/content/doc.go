// Package content counts the BundleDeployments that reference each Content
// and deletes Contents nothing has referenced for a grace period.
package content
