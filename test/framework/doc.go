// Package framework holds what the end-to-end suites share. The tests are
// built in three layers, each using only the ones below it:
//
//   - test/controlplane starts real control planes (kube-apiserver and etcd
//     built from source) and can stop and start their parts for outages.
//   - framework (this package) drives the system as a user would: it builds
//     the binaries once and runs them as processes with their logs kept
//     (Start, and StartManagerProcess, which returns only once the manager's
//     /readyz answers), applies YAML as kubectl would, runs the manager's
//     controllers in process with exactly its generated rights
//     (StartManager), gives clients that hold exactly an attacker's rights
//     (footholds.go), and cuts network links (Proxy). It uses no Ginkgo or
//     Gomega: the local development environment (fleet dev up) uses it too.
//   - test/framework/e2e holds the Ginkgo and Gomega helpers of the specs:
//     starting a suite from a SuiteInput (SetUpSuite: its control planes,
//     binaries, in-process manager and log directory, stopped through
//     DeferCleanup), joining downstream clusters through the `fleet` CLI and
//     the real agent (Join, JoinedCluster) and waits on conditions
//     (WaitFor, HoldsFor).
//   - test/e2e/<area> packages hold the specs, as functions such as
//     reliability.OutageSpec(ctx, func() reliability.SpecInput) in the shape
//     of Cluster API's QuickStartSpec: a spec reads everything it runs
//     against from its SpecInput, which the getter returns once BeforeSuite
//     has built it, and keeps no package-level state. What its specs share
//     is a small struct, and a long spec registers them through named step
//     functions over it (no spec function over about 150 lines). The
//     suite_test.go beside them declares a SuiteInput, calls SetUpSuite in
//     BeforeSuite and registers the specs in its Test function, each in the
//     container it documents (Ordered where the specs build on each other).
//
// Specs never sleep to synchronise: they wait on a condition with a timeout
// and a description of what they wait for, and a period that must pass on
// purpose is checked with HoldsFor (Consistently) for what must hold
// meanwhile.
package framework
