// Package devenv brings the whole system up on this machine, for `make demo`
// (`fleet dev up`) and for the test that checks the demo works: a manager
// control plane and two cluster control planes (real kube-apiserver and etcd;
// the two clusters also run kube-controller-manager, kube-scheduler and kwok's
// simulated nodes unless Options.Workloads is off),
// the manager and one agent per cluster as processes, edge-1 registered by
// token exactly as a user would, capi-1 enrolled through Cluster API objects
// as Cluster API would write them, the manager's own cluster as the Cluster
// fleet-local/local (its agent installed by the manager, as Fleet does), a
// GitRepo of the examples shipped in config/examples for every cluster of
// fleet-default, and one in fleet-local without targets that lands on the
// manager's own cluster (Fleet's quickstart). Everything it starts is recorded in a state directory so
// that `fleet dev down` can stop it by PID.
package devenv
