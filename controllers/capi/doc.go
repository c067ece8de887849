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
// dropped), spec.kubeConfigSecret <name>-kubeconfig, and the Cluster API
// Cluster's labels but those of Cluster API's and fleet's own domains
// (cluster.x-k8s.io, fleet.cattle.io and their subdomains), plus
// fleet.cattle.io/cluster-class and fleet.cattle.io/cluster-class-namespace
// when it uses a ClusterClass. Labels are kept in sync, removals included:
// the fleet.cattle.io/capi-labels annotation lists the keys that came from
// Cluster API, and only those are ever removed; other labels on the fleet
// Cluster are left alone (a key set on both takes Cluster API's value).
// spec.templateValues.ClusterAPI holds the facts Helm values can template
// (TemplateFacts: clusterName, namespace, class, classNamespace,
// kubernetesVersion, variables); other keys of templateValues are left
// alone. Optional annotations on the Cluster API Cluster:
// fleet.cattle.io/agent-namespace (the fleet Cluster's
// spec.agentNamespace, kept in sync), fleet.cattle.io/client-id (its
// spec.clientID, at creation; default: the workload cluster's kube-system
// UID, so that a cluster first registered by token keeps its identity),
// fleet.cattle.io/keep-resources-on-unenroll (copied to the fleet Cluster,
// see below), and, for a cluster without a CNI yet,
// fleet.cattle.io/host-network ("true": spec.hostNetwork) and
// fleet.cattle.io/agent-tolerations ("bootstrap" for BootstrapTolerations,
// or a list: spec.agentTolerations). The ClusterClass variables
// fleetHostNetwork and fleetAgentTolerations say the same; the annotations
// win. A value that does not parse fails enrollment with a message naming
// it. Removing them leaves the fleet Cluster's settings as they are.
//
// Choosing. By default every Cluster API Cluster is enrolled (opt-out).
// With ClusterSelector or NamespaceSelector set (the manager's
// --capi-cluster-selector and --capi-namespace-selector) only the clusters
// they match are (opt-in). Either way the label fleet.cattle.io/enroll:
// "false" on the Cluster API Cluster or on its namespace keeps a cluster
// out.
//
// Un-enrolling. A cluster that stops being chosen (opted out, or no longer
// matching in opt-in mode) is un-enrolled: its fleet Cluster is deleted,
// and the import controller removes the agent downstream before the
// BundleDeployments go, so the releases keep running unless the cluster
// says fleet.cattle.io/keep-resources-on-unenroll: "false" (then they are
// uninstalled first). This controller's finalizer and condition go. A
// cluster released by an earlier version (without the finalizer) keeps its
// fleet Cluster. Choosing it again enrolls it anew.
//
// A person deleting the fleet Cluster of an enrolled cluster un-enrolls it
// the same way, and the decision is recorded on the Cluster API Cluster:
// the annotation fleet.cattle.io/unenrolled (the time), FleetAgentReady
// False with reason Unenrolled, and an event. The cluster is not enrolled
// again until a person removes that annotation. To tell a deleted fleet
// Cluster from one not created yet, fleet.cattle.io/enrolled-uid (the
// Cluster API Cluster's own UID, so that a copy moved by clusterctl means
// nothing) records the creation, and absence is checked uncached.
//
// Paused. While spec.paused is true (or the cluster.x-k8s.io/paused
// annotation is set) nothing is created, updated or deleted, as Cluster API
// itself does.
//
// Deletion. A finalizer (fleet.cattle.io/capi-enrollment), added when the
// fleet Cluster is created, makes the deletion of the Cluster API Cluster
// delete the fleet Cluster, whose own controllers then remove the agent
// downstream where the cluster can still be reached (giving up when it
// cannot), and its namespace and deployments; this works without a garbage
// collector. A fleet Cluster
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
// where Cluster API's CRDs are installed (Installed); a manager started
// before Cluster API runs WhenInstalled, which sets the controller up once
// discovery shows Cluster API, without a restart.
package capi
