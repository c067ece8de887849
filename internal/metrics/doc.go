// Package metrics holds the manager's Prometheus metrics and the events it
// records when the state of a GitRepo, Bundle or Cluster changes.
//
// The state gauges (fleet_gitrepos, fleet_bundles, fleet_bundledeployments,
// fleet_clusters) count objects by namespace and state. They are kept from
// changes, not by scanning: one informer event handler per kind remembers
// the last state it saw of each object and, per change, moves that object
// from its old state's count to its new one. A scrape reads the counts. No
// series carries an object's name, so the number of series grows with
// namespaces and states, never with objects.
//
// The same handlers record a StateChanged event when an object's state
// turns into or out of one that asks for attention (ErrApplied, NotReady,
// Modified, Offline). Every event the manager records goes through one Limiter: a
// burst per object, then one per interval, and a cap over all objects, so
// a flapping object or a storm cannot flood the API server.
//
// Handlers and events run on the leader only (Setup adds a runnable that
// needs leader election); counters of outcomes (registrations, imports, git
// fetches) are counted by the controllers, which run on the leader too.
package metrics
