// Package registration holds the rules the controllers that make Clusters
// on request share: the registration controller (an agent asks to join),
// the registration token controller (a token's lifetime) and the import
// controller (a manager-initiated join, which mints tokens and names a
// Cluster's labels on the agent's behalf). It lives apart from those
// controllers so that none of them imports another.
package registration
