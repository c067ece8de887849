// Package conformance checks that directories laid out for Rancher Fleet
// become the Bundles Fleet makes of them. Each case is a small repository
// (a map of files) and the Bundles `fleet apply NAME PATH... -o -` must
// print for it, derived from Fleet's documented behaviour; the real fleet
// binary is run, so what is checked is what a user gets.
package conformance
