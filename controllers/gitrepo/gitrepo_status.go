package gitrepo

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/sourcepoll"
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

// setStatus computes the whole status (but commit and observedGeneration,
// which only a successful sync sets) from the last poll and sync and the
// repo's Bundles.
func setStatus(repo *fleet.GitRepo, st *repoState, bundles []fleet.Bundle) {
	r := sourcepoll.RollupBundles(bundles)
	s := &repo.Status
	if st.restrictErr != nil {
		c := outcome.Condition(fleet.ConditionAccepted, st.restrictErr, "", "", fleet.ReasonRestricted)
		c.ObservedGeneration = repo.Generation
		meta.SetStatusCondition(&s.Conditions, c)
	} else if st.poll.Done {
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
	ready := r.ReadyCondition(s.Conditions, fleet.ConditionAccepted, fleet.ConditionGitPolling)
	ready.ObservedGeneration = repo.Generation
	meta.SetStatusCondition(&s.Conditions, ready)
	s.Summary = r.Summary
	s.ReadyClusters = r.ReadyClusters
	s.DesiredReadyClusters = r.DesiredReadyClusters
	s.Display = r.Display(s.Conditions, fleet.ConditionAccepted, fleet.ConditionGitPolling)
}

// pollRecordEvery is how old status.lastPollingTriggered may grow while
// polls change nothing else in the status: recording every poll would write
// the status of every GitRepo at every interval (15 s by default) for a
// time alone. It stays well inside what the gitrepo-behind check of fleet
// analyze allows (three intervals and a minute).
const pollRecordEvery = time.Minute

// recordPoll sets after.lastPollingTriggered to polled, the time of the
// poll this reconcile made (zero: it made none), when the status changes
// anyway, or when the time before holds is pollRecordEvery old.
func recordPoll(before, after *fleet.GitRepoStatus, polled time.Time) {
	if polled.IsZero() {
		return
	}
	if polled.Sub(before.LastPollingTriggered.Time) >= pollRecordEvery || !equality.Semantic.DeepEqual(before, after) {
		after.LastPollingTriggered = metav1.NewTime(polled)
	}
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
