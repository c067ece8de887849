// Package managermove holds end-to-end specs of agents following their
// manager: a manager rebuilt on a new control plane at a new URL, with the
// old one gone, and a manager whose own URL changes. They run the real
// fleet-manager and fleet-agent binaries against local control planes,
// every manager reached through a loopback proxy whose address is the URL
// agents know it by, so that an address can go away while the API server
// behind it stays.
package managermove
