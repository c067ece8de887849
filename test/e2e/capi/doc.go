// Package capi holds the end-to-end specs of manager-initiated registration
// and Cluster API enrollment: a manager control plane with Cluster API's
// Cluster CRD, three workload control planes, the manager's controllers (with
// the clusterimport and capi reconcilers), and the real
// fleet-agent binary, started by a stand-in kubelet from exactly the objects
// the manager installed downstream. The test plays Cluster API: it creates
// the Cluster API Clusters, marks their control planes initialized and writes
// their kubeconfig Secrets.
//
// Each spec is a function taking a context and a function returning its
// SpecInput, so that a suite decides what it runs against; the suite of this
// directory (suite_test.go) starts the control planes and the manager in
// process.
package capi
