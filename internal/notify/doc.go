// Package notify delivers the message about one rollout transition to one
// destination: a generic webhook (a JSON document of a documented schema,
// signed with HMAC-SHA256), a Slack or Microsoft Teams incoming webhook, or
// a commit status on GitHub, GitLab, Bitbucket or Gitea. It knows nothing of
// Kubernetes objects: controllers/notification computes the Message and
// gives the destination's address and credentials.
//
// Every request goes through an egress.Dialer, so a tenant cannot make the
// manager post to what only the manager can reach; a request that fails for
// a reason that may pass (no answer, 429, 5xx) is retried a few times with
// backoff, one that cannot pass (4xx, refused address) is not.
package notify
