// Package v1alpha1 holds the notification.gitfleet.io/v1alpha1 API, the
// project's own group beside Fleet's: a Notification tells the manager whom
// to tell about the rollouts of some GitRepos and HelmOps of its namespace
// (one message per rollout transition, or a commit status on the git host).
//
// The group is not fleet.cattle.io on purpose: Fleet has no such kind, and
// a kind of our own must not claim Fleet's group.
//
// +kubebuilder:object:generate=true
// +groupName=notification.gitfleet.io
package v1alpha1
