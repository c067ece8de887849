// Package upstream is the agent's connection to the manager's API server:
// the client it talks through (NewClient, with Mapper, which knows the few
// kinds the agent uses there without asking), the Credential it talks with
// and where that is kept (the fleet-agent Secret of the agent's system
// namespace: LoadStored, Store), and Check, which tells whether the
// manager still accepts it. agent/join obtains the Credential by
// registering; from then on this package keeps it working:
//
//   - a Rotator (rotation.go) takes the next token of the agent's own
//     ServiceAccount before the current one expires, from the Secret the
//     manager writes it to in the agent's cluster namespace (the agent
//     mints no token itself), stores it, and every client built from the
//     Credential sends it from then on;
//   - when the manager publishes another address for itself (address.go),
//     Follow checks that the manager accepts the Credential there and
//     stores it with the new address; the agent then starts its clients
//     again from it (agent/move.go), with no new registration.
package upstream
