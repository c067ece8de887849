// Package ocistorage is the end-to-end spec of Fleet's OCI storage: GitRepo
// bundle contents pushed to a real OCI registry on loopback instead of
// etcd, and pulled by digest by real agents on two clusters, each with the
// credential the manager put in its own cluster namespace.
package ocistorage
