// Package egress is the one way the manager connects to a host that a
// tenant names: a Git repository (HTTP or SSH), a chart repository, registry
// or chart URL, a chart dependency, the GitHub API of a GitHub App. A tenant
// choosing the URL must not make the manager reach what only the manager
// can reach (its own loopback services, the cloud metadata endpoint) nor
// learn, from the error, which ports are open there.
//
// A Policy says which addresses may be connected to: loopback, link-local
// (169.254.169.254, where clouds serve instance credentials), unspecified,
// multicast and broadcast addresses are refused unless the operator allows
// them (Allow), and any address the operator lists in Deny is refused, over
// Allow. A Dialer checks the address it is about to connect to, after DNS
// resolution and for every connection, so a name that resolves to a refused
// address, a DNS answer that changes between two requests, and a redirect to
// another host are all checked the same way: nothing is sent to a refused
// address, not even a TCP SYN.
//
// A refused connection fails with an error that errors.Is finds as
// ErrRefused; ForTenant turns it into the one message a tenant sees
// (Message) and logs the detail (which address, which rule) for the
// operator.
package egress
