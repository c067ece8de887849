// Package capi enrolls Cluster API clusters into fleet: it watches
// cluster.x-k8s.io/v1beta2 Clusters and their <name>-kubeconfig Secrets (by
// metadata only: it never reads a kubeconfig, internal/secretmeta) and
// creates, for each, a fleet Cluster that the clusterimport controller then
// installs the agent into.
//
// Enrollment. A Cluster API Cluster is enrolled by default, once its control
// plane is initialized (status.initialization.controlPlaneInitialized, or
// the ControlPlaneInitialized condition True) and its kubeconfig Secret
// exists. The fleet Cluster has the same namespace and name, the
// annotations fleet.cattle.io/capi-cluster-name and
// fleet.cattle.io/capi-cluster-uid naming the Cluster API Cluster (not an
// owner reference: a garbage collector would follow it when `clusterctl
// move` deletes the Cluster API Cluster; one left by an earlier version is
// dropped), spec.kubeConfigSecret
// <name>-kubeconfig, and the Cluster API Cluster's labels plus
// fleet.cattle.io/cluster-class: <spec.topology.classRef.name> when it uses
// a ClusterClass. Labels are kept in sync, removals included: the
// fleet.cattle.io/capi-labels annotation lists the keys that came from
// Cluster API, and only those are ever removed; other labels on the fleet
// Cluster are left alone (a key set on both takes Cluster API's value).
// Optional annotations on the Cluster API Cluster: fleet.cattle.io/agent-namespace
// (the fleet Cluster's spec.agentNamespace, kept in sync) and
// fleet.cattle.io/client-id (its spec.clientID, at creation; default: the
// workload cluster's kube-system UID, so that a cluster first registered by
// token keeps its identity).
//
// Opting out. The label fleet.cattle.io/enroll: "false" on the Cluster API
// Cluster or on its namespace keeps the cluster out. Set on a cluster that
// is already enrolled, it releases it: the fleet Cluster stays (deleting it
// would remove every deployment from a running cluster on a label change),
// but it is no longer synced, and this controller's finalizer and condition
// go. Remove the label to enroll again.
//
// Paused. While spec.paused is true (or the cluster.x-k8s.io/paused
// annotation is set) nothing is created, updated or deleted, as Cluster API
// itself does.
//
// Deletion. A finalizer (fleet.cattle.io/capi-enrollment), added when the
// fleet Cluster is created, makes the deletion of the Cluster API Cluster
// delete the fleet Cluster, whose own controller then removes its namespace
// and deployments; this works without a garbage collector. A fleet Cluster
// of the same name that this Cluster API Cluster does not own is never
// touched: enrollment fails and says so.
//
// Move. `clusterctl move` pauses the Cluster API Cluster, creates it in the
// target management cluster, then here adds the annotation
// clusterctl.cluster.x-k8s.io/delete-for-move, strips every finalizer and
// deletes it. Seeing that annotation (even while paused), or the Cluster API
// Cluster gone without this controller's finalizer having run, the fleet
// Cluster is kept with its deployments (deleting it would uninstall every
// release of a cluster that only changes managers) and annotated
// fleet.cattle.io/capi-moved (with an event MovedAway); the import
// controller then leaves the agent to the manager of the target, which
// enrolls the cluster once clusterctl unpauses it there and takes the agent
// over (the releases, under the same names, are adopted). A Cluster API
// Cluster that comes back here (same UID) clears the annotation; one of the
// same name but another UID replaces the moved-away fleet Cluster.
//
// Status. The FleetAgentReady condition on the Cluster API Cluster is
// computed once per reconcile and written, only when it changed, by
// server-side apply of that one entry (field manager fleet-capi), so
// Cluster API's conditions are left alone; a change is recorded as an event.
// Reasons: WaitingForControlPlane, Installing (the agent is being installed
// or has not registered), Registered (True), Failed (the message is the
// fleet Cluster's Imported condition, e.g. "KubeconfigInvalid: ...", or why
// enrollment itself failed, e.g. a fleet Cluster of the same name that
// another owner holds: that stops until a watched object changes). A
// transient error leaves the condition as it is and is retried with
// backoff.
//
// Secrets are watched, not polled: events map to the Cluster named by their
// cluster.x-k8s.io/cluster-name label, so a kubeconfig Secret appearing or
// being rotated is acted on at once. The manager's scheme must hold the
// Cluster API types (AddToScheme), and the controller must only be set up
// where Cluster API's CRDs are installed (Installed).
package capi
