// Package knownhosts embeds the SSH host keys of the well-known git hosts
// (github.com, gitlab.com, bitbucket.org, Azure DevOps), as they publish
// them. `fleet install controller` and config/default ship them in the
// known-hosts ConfigMap of the system namespace, where the manager looks
// for host keys an SSH repository's Secret does not hold, as Fleet does:
// an SSH GitRepo on those hosts needs only a private key.
package knownhosts

import _ "embed"

// Data is the known_hosts file: one line per host and key type.
//
//go:embed known_hosts
var Data string
