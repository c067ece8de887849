// Package schedule keeps Fleet's deployment windows: for each Schedule it
// reads the cron schedule, duration and time zone (schedule_window.go, a
// pure function of the clock), finds the clusters of its namespace its
// targets select, and writes its status (active, nextStartTime,
// matchingClusters, Ready). For each Cluster it writes status.scheduled
// (some Schedule holds it) and status.activeSchedule (one of them has its
// window open), as Fleet's Schedule controller does, and comes back when
// the next window opens or closes.
//
// The reconcile key is a namespace: Schedules, Clusters and ClusterGroups
// are read together, so that a cluster held by several Schedules is written
// once, from all of them. A Schedule whose schedule, duration or location
// is invalid gets Ready False naming the field and holds no cluster; the
// others go on.
//
// The bundle controller turns a held cluster outside its windows into
// spec.offSchedule on its BundleDeployments, and the agent deploys no new
// deploymentID while it is set: agent upgrades, which reach agents through
// their agent Bundle, wait for the window too.
package schedule
