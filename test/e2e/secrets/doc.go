// Package secrets holds the end-to-end specs of secrets that only their
// clusters can read: SOPS files in a bundle, encrypted by the real sops CLI
// for the age recipients `fleet secret recipients` prints, opened by the
// real agents of the clusters they are for and by no other.
package secrets
