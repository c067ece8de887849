package gitrepo

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/summary"
)

// gitPollingCondition reports the git phases of the last poll: asking the
// remote for its latest commit and, when it was new, fetching it.
func gitPollingCondition(gitErr error, latest string) metav1.Condition {
	return outcome.Condition(fleet.ConditionGitPolling, gitErr, fleet.ReasonPolled, "latest commit "+latest, fleet.ReasonFetchFailed)
}

// acceptedCondition says whether the spec could be acted on: the repository
// reached with its credentials and branch, and its bundles read and written.
// A transient git error only shows in GitPolling: Accepted keeps reporting
// the last sync.
func acceptedCondition(gitErr, syncErr error, commit string) metav1.Condition {
	err := syncErr
	if outcome.IsStalling(gitErr) {
		err = gitErr
	}
	return outcome.Condition(fleet.ConditionAccepted, err, fleet.ReasonBundlesRead,
		"bundles of commit "+shortSHA(commit)+" are applied", fleet.ReasonSyncFailed)
}

// readyCondition is False with the message of the first False condition,
// else False with the error of a broken Bundle, else False while some bundle
// deployment is not ready, else True.
func readyCondition(conds []metav1.Condition, r rollup) metav1.Condition {
	for _, t := range []string{fleet.ConditionAccepted, fleet.ConditionGitPolling} {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionFalse {
			return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: c.Reason, Message: c.Message}
		}
	}
	if r.errBundle != "" {
		return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ReasonBundleError, Message: r.message}
	}
	if !r.ready() {
		return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ReasonNotReady, Message: r.message}
	}
	return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionTrue, Reason: fleet.ReasonReady}
}

// Bounds of the Warning condition's message: a repository with many broken
// fleet.yaml files must not make the status too large to write.
const (
	maxWarningsListed    = 10
	maxWarningMessageLen = 300
)

// warningCondition is the Warning condition for the warnings of the last
// read of the bundles (True, listing the first of them), and false when
// there were none: the condition is then removed.
func warningCondition(warnings []string) (metav1.Condition, bool) {
	if len(warnings) == 0 {
		return metav1.Condition{}, false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d fleet.yaml %s ignored: ", len(warnings), plural(len(warnings), "key", "keys"))
	for i, w := range warnings {
		if i == maxWarningsListed {
			fmt.Fprintf(&b, "; and %d more", len(warnings)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		if len(w) > maxWarningMessageLen {
			w = strings.ToValidUTF8(w[:maxWarningMessageLen], "") + "..."
		}
		b.WriteString(w)
	}
	return metav1.Condition{Type: fleet.ConditionWarning, Status: metav1.ConditionTrue, Reason: fleet.ReasonIgnoredFields, Message: b.String()}, true
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// rollup is what a GitRepo's status shows of its Bundles.
type rollup struct {
	summary              fleet.BundleSummary
	readyClusters        int
	desiredReadyClusters int
	// state is the worst state over the bundle deployments, "" with none.
	state   fleet.BundleState
	message string
	// errBundle is the first Bundle, by name, that is broken itself
	// (bundleError), and errMessage what its Ready condition says.
	errBundle, errMessage string
}

func (r rollup) ready() bool {
	return r.errBundle == "" && summaryReady(r.summary)
}

func summaryReady(s fleet.BundleSummary) bool {
	return s.Ready >= s.DesiredReady && s.NotReady+s.WaitApplied+s.ErrApplied+s.OutOfSync+s.Modified+s.Pending == 0
}

// bundleError returns the message of a Bundle's Ready condition when it is
// False although none of its deployments is behind: the Bundle itself is
// broken (invalid targets, Helm values that do not render for a cluster) and
// may target nothing at all, so its summary alone would look ready.
func bundleError(b *fleet.Bundle) (string, bool) {
	c := meta.FindStatusCondition(b.Status.Conditions, fleet.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || !summaryReady(b.Status.Summary) {
		return "", false
	}
	return c.Message, true
}

// rollupBundles sums the summaries of a GitRepo's Bundles. As in Fleet,
// desiredReadyClusters is the most clusters any bundle targets and
// readyClusters the fewest ready clusters of any of those bundles (a cluster
// is ready only when every bundle is).
func rollupBundles(bundles []fleet.Bundle) rollup {
	var r rollup
	sort.Slice(bundles, func(i, j int) bool { return bundles[i].Name < bundles[j].Name })
	ready := -1
	worstBundle := ""
	for _, b := range bundles {
		s := b.Status.Summary
		r.summary.Ready += s.Ready
		r.summary.NotReady += s.NotReady
		r.summary.WaitApplied += s.WaitApplied
		r.summary.ErrApplied += s.ErrApplied
		r.summary.OutOfSync += s.OutOfSync
		r.summary.Modified += s.Modified
		r.summary.Pending += s.Pending
		r.summary.DesiredReady += s.DesiredReady
		for _, nr := range s.NonReadyResources {
			if len(r.summary.NonReadyResources) < 10 {
				r.summary.NonReadyResources = append(r.summary.NonReadyResources, nr)
			}
		}
		if s.DesiredReady > 0 {
			r.desiredReadyClusters = max(r.desiredReadyClusters, s.DesiredReady)
			if ready < 0 || s.Ready < ready {
				ready = s.Ready
			}
		}
		if st := worstState(s); st != "" && (r.state == "" || summary.Worse(st, r.state)) {
			r.state, worstBundle = st, b.Name
		}
		if msg, broken := bundleError(&b); broken && r.errBundle == "" {
			r.errBundle, r.errMessage = b.Name, msg
		}
	}
	r.readyClusters = max(ready, 0)
	switch {
	case r.errBundle != "":
		r.message = fmt.Sprintf("Bundle %s: %s", r.errBundle, r.errMessage)
	case r.state != "" && r.state != fleet.Ready:
		r.message = fmt.Sprintf("%s(%d) [Bundle %s%s]", r.state, summary.Count(r.summary, r.state), worstBundle, firstMessage(bundles, worstBundle, r.state))
	case !r.ready():
		r.message = fmt.Sprintf("%d/%d bundle deployments ready", r.summary.Ready, r.summary.DesiredReady)
	}
	return r
}

// worstState is the worst state counted in a summary, "" when it counts none.
func worstState(s fleet.BundleSummary) fleet.BundleState {
	worst := summary.WorstState(s)
	if worst == fleet.Ready && s.Ready == 0 {
		return ""
	}
	return worst
}

func firstMessage(bundles []fleet.Bundle, name string, st fleet.BundleState) string {
	for _, b := range bundles {
		if b.Name != name {
			continue
		}
		for _, nr := range b.Status.Summary.NonReadyResources {
			if nr.State == st && nr.Message != "" {
				return ": " + nr.Name + ": " + nr.Message
			}
		}
	}
	return ""
}

// display is what kubectl shows: ready/desired bundle deployments, the worst
// state, and the first problem.
func display(conds []metav1.Condition, r rollup) fleet.GitRepoDisplay {
	return summary.Display(conds, summary.Rollup{Summary: r.summary, State: r.state, Message: r.message, BundleErr: r.errBundle != ""},
		fleet.ConditionAccepted, fleet.ConditionGitPolling)
}

// setStatus computes the whole status (but commit and observedGeneration,
// which only a successful sync sets) from the last poll and sync and the
// repo's Bundles.
func setStatus(repo *fleet.GitRepo, st *repoState, bundles []fleet.Bundle) {
	r := rollupBundles(bundles)
	s := &repo.Status
	if st.restrictErr != nil {
		c := outcome.Condition(fleet.ConditionAccepted, st.restrictErr, "", "", fleet.ReasonRestricted)
		c.ObservedGeneration = repo.Generation
		meta.SetStatusCondition(&s.Conditions, c)
	} else if st.polled {
		for _, c := range []metav1.Condition{
			gitPollingCondition(st.gitErr, st.latest),
			acceptedCondition(st.gitErr, st.syncErr, s.Commit),
		} {
			c.ObservedGeneration = repo.Generation
			meta.SetStatusCondition(&s.Conditions, c)
		}
	}
	if st.warningsRead {
		if c, ok := warningCondition(st.warnings); ok {
			c.ObservedGeneration = repo.Generation
			meta.SetStatusCondition(&s.Conditions, c)
		} else {
			meta.RemoveStatusCondition(&s.Conditions, fleet.ConditionWarning)
		}
	}
	ready := readyCondition(s.Conditions, r)
	ready.ObservedGeneration = repo.Generation
	meta.SetStatusCondition(&s.Conditions, ready)
	s.Summary = r.summary
	s.ReadyClusters = r.readyClusters
	s.DesiredReadyClusters = r.desiredReadyClusters
	s.Display = display(s.Conditions, r)
}

func shortSHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	if sha == "" {
		return "(none)"
	}
	return strings.ToLower(sha)
}

// conditionEvent is an event to record about a GitRepo.
type conditionEvent struct {
	warning              bool
	reason, action, note string
}

// conditionEvents are the events that the change of the Accepted and
// GitPolling conditions from before to after deserves: a Warning when one
// turns False or keeps False with a new reason, a Normal event when one
// recovers. A new message alone (a new commit, the same failure worded
// again) is no news, so a stalled GitRepo polled every 15s records one
// Warning, not one per poll.
func conditionEvents(before, after []metav1.Condition) []conditionEvent {
	var out []conditionEvent
	for _, t := range []struct{ cond, action string }{{fleet.ConditionGitPolling, "Poll"}, {fleet.ConditionAccepted, "Sync"}} {
		was, now := meta.FindStatusCondition(before, t.cond), meta.FindStatusCondition(after, t.cond)
		switch {
		case now == nil:
		case now.Status == metav1.ConditionFalse && (was == nil || was.Status != metav1.ConditionFalse || was.Reason != now.Reason):
			out = append(out, conditionEvent{warning: true, reason: now.Reason, action: t.action, note: now.Message})
		case now.Status == metav1.ConditionTrue && was != nil && was.Status == metav1.ConditionFalse:
			out = append(out, conditionEvent{reason: now.Reason, action: t.action, note: now.Message})
		}
	}
	return out
}
