// Package webhook serves the git push webhooks of GitHub, GitLab, Bitbucket
// Cloud, Bitbucket Server, Gogs and Azure DevOps for GitRepos.
//
// NewHandler returns an http.Handler that parses a push (hosts.go), finds
// the GitRepos that follow the pushed repository and branch, verifies the
// call against each one's webhookSecret (or the manager-wide secret) with
// its host's own scheme, and records the pushed commit in their
// status.webhookCommit. It does not fetch anything itself: the GitRepo
// controller (package gitrepo) sees status.webhookCommit change and polls
// the repository at once. Writing the status rather than signalling the
// controller in memory works whichever manager replica receives the call.
//
// The handler faces anyone who can reach its port: bodies are bounded,
// each remote address has its own rate (limit.go), commits must be full
// object names, and answers name no GitRepo nor tell whether one follows a
// repository to a caller that proves no secret.
package webhook
