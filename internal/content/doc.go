// Package content is the wire format of a Content, the cluster-scoped object
// that carries a Bundle's resources to the agents: the manager encodes it
// (Encode) and the agent decodes it (Decode). Both sides import this package
// so that the format, its name and its checks cannot drift apart.
//
// A Content's body is the gzip of the JSON {"resources": [...]}; its name is
// derived from that JSON (names.Content), so identical resources share one
// Content, and SHA256Sum is the sha256 of the JSON, which Decode checks.
package content
