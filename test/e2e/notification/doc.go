// Package notification holds the end-to-end specs of Notifications: a real
// manager (restarted mid-rollout once), a real agent on a downstream control
// plane and a real git server roll out commits, and loopback receivers
// standing in for a generic webhook, Slack, Teams and the commit-status APIs
// of GitHub, GitLab and Gitea check what the manager tells them, payloads,
// signatures and auth headers included.
package notification
