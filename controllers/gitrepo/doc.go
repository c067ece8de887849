// Package gitrepo reconciles GitRepos: it is the first stage of the two-stage
// pull, turning a git repository into Bundles in the GitRepo's namespace,
// which the bundle controller then targets at clusters.
//
// Each GitRepo is polled every spec.pollingInterval (default 15s, ±10%
// jitter) with one cheap ls-remote (internal/gitfetch). Only when the commit
// or the spec (its generation, which covers forceSyncGeneration) differs from
// the last good sync does the controller fetch the commit into its on-disk
// cache, read its bundles (internal/bundlereader) and write them: Bundles are
// created or updated only where they differ, labelled
// fleet.cattle.io/repo-name and fleet.cattle.io/commit and owned by the
// GitRepo, and the repo's Bundles that the commit no longer has are deleted.
// When anything fails nothing is deleted: the last good Bundles stay
// deployed, and the conditions say what went wrong; a commit in which the
// paths hold no bundle at all is such a failure. A Bundle that is broken
// itself (invalid targets) makes the GitRepo's Ready condition False.
// User-fixable errors (bad fleet.yaml, missing branch, failed authentication,
// a missing Secret) are outcome.Stalling errors with a Reason of
// api/v1alpha1: they set Accepted (and, for git errors, GitPolling) False,
// record one Warning event, and the GitRepo keeps polling at its interval,
// so that a fix pushed to git is found; transient ones are retried with
// backoff. What the last poll and sync found is kept in memory per GitRepo,
// because most reconciles (a Bundle's status changed) are not polls.
//
// GitRepos that follow one repository and branch with identical credentials
// (the Secret's content, CA bundle, TLS and SSH host key options) share its
// git traffic through internal/gitshare: one ls-remote per polling interval
// (at its interval, a GitRepo reuses an answer it has not taken yet and
// younger than its interval) or per webhook announcement, and one fetch
// per new commit, whose files are read in place by every GitRepo of the
// group. So a GitRepo alone sees a push within an interval, one of a group
// within two at most (at once with the webhook).
// Restrictions and Secrets are still read per GitRepo, before the share is
// asked, and a GitRepo with credentials of its own asks the remote with
// them alone.
//
// spec.paused still syncs, but marks the Bundles paused, so new commits are
// not rolled out. spec.disablePolling leaves syncing to spec changes and the
// webhook.
//
// The webhook (package webhook below this one) records the commit of a
// verified push in status.webhookCommit of the GitRepos that follow that
// repository and branch; the controller polls when that field changes.
//
// Status is computed once per reconcile and patched only when it changed:
// commit and observedGeneration (after a successful sync), the Accepted,
// GitPolling and Ready conditions, and a rollup of the Bundles' summaries.
// lastPollingTriggered is the time of the last poll, written with any other
// change of the status, and alone only once the time it holds is a minute
// old: a fleet of GitRepos polling every 15 s does not write their statuses
// four times a minute for a time alone.
// A finalizer deletes the GitRepo's Bundles and git cache before it goes.
package gitrepo
