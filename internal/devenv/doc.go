// Package devenv brings the whole system up on this machine, for `make demo`
// (`fleet dev up`) and for the test that checks the demo works: a manager
// control plane and two cluster control planes (real kube-apiserver and etcd),
// the manager and one agent per cluster as processes, edge-1 registered by
// token exactly as a user would, capi-1 enrolled through Cluster API objects
// as Cluster API would write them, and a GitRepo of the examples shipped in
// config/examples. Everything it starts is recorded in a state directory so
// that `fleet dev down` can stop it by PID.
package devenv
