// Package capienroll reads, from a Cluster API Cluster and the fleet
// Clusters, whether and why not the manager's Cluster API enrolment
// (controllers/capi) has enrolled it: the names that enrolment writes on the
// wire, and pure functions over them. The dashboard's Cluster API page and
// `fleet analyze` (internal/diagnose) both explain a cluster not enrolled
// with them, so that the two say the same; neither may import a controller.
package capienroll
