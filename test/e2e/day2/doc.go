// Package day2 holds the end-to-end specs of the day-2 verbs of the fleet
// command line (analyze, dump, bundlediff, preview, cleanup
// clusterregistration, deploy), run as the built binary against a manager
// and downstream clusters joined with real agents, a GitRepo served from a
// real git repository on loopback.
package day2
