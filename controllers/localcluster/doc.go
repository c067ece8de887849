// Package localcluster keeps the manager's own cluster in Fleet's shape: in
// the fleet-local namespace a Cluster named local (label name=local), its
// kubeconfig Secret local-cluster, and a ClusterGroup named default that
// selects it. A GitRepo in fleet-local without targets gets the default
// target (clusterGroup: default) and so lands on the manager's cluster, as
// in Fleet's quickstart.
//
// The agent of the local Cluster is installed by the import controller
// like any other (an import token, the same rights upstream), through the
// manager's own connection instead of a kubeconfig: see
// clusterimport.LocalCluster. The Secret holds only how that agent reaches
// the manager.
//
// As Fleet does at start, the manager applies these objects when it starts
// (resetting the fields it sets, keeping the others); while it runs it
// re-creates any of them that is deleted. The manager's --local-cluster=false
// turns all of it off.
package localcluster
