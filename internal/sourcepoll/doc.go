// Package sourcepoll is what the GitRepo and HelmOp controllers share: both
// poll a source (a git repository, a chart repository) into Bundles of
// their namespace, and do so the same way.
//
//   - Poll is the poll state machine: when a poll is due (never polled, a
//     retry asked for, a new generation, the interval over), when the next
//     one is (with Jitter), and what a failure or a hold asks for.
//   - States keeps one such state per object in memory, and Slots shares
//     the fetch slots (one per worker) fairly among namespaces.
//   - Rollup sums the Bundles' summaries into the object's status: the
//     Ready condition, ready clusters and what kubectl displays.
//   - Finalize deletes the Bundles an object made before it goes.
//   - Watches adds the watches both need: their Bundles, those Bundles'
//     BundleDeployments and the GitRepoRestrictions of their namespaces.
//
// What differs stays in each controller: what a poll asks (ls-remote,
// index.yaml), which conditions report it, and how Bundles are written.
// The GitRepoRestriction rules themselves live in internal/restriction.
package sourcepoll
