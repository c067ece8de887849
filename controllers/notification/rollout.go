package notification

import (
	"slices"
	"sort"
	"time"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/notify"
	"github.com/gitfleet/fleet/internal/sourcepoll"
)

// source is a GitRepo or HelmOp as a rollout needs it.
type source struct {
	kind     notification.SourceKind
	name     string
	revision string
	// repo is the GitRepo's repository, or the HelmOp's chart repository.
	repo string
}

// phase is where a rollout is.
type phase int

const (
	// progressing: not every cluster is ready yet, and none failed.
	progressing phase = iota
	// succeeded: every targeted cluster is ready.
	succeeded
	// failed: a cluster failed to apply, or a Bundle is broken.
	failed
)

// rollout is one source's current rollout, as its Bundles show it.
type rollout struct {
	source
	// current says the Bundles show this revision: each carries it and
	// its status is for its current generation.
	current    bool
	phase      phase
	summary    fleet.BundleSummary
	ready      int
	desired    int
	partitions []partition
	errors     []notify.Failure
}

// partition is one rollout partition, over every Bundle that has it.
type partition struct {
	name    string
	reached bool
}

// observe reads a rollout from a source and its Bundles (the slice is not
// changed).
func observe(src source, bundles []fleet.Bundle) rollout {
	r := rollout{source: src}
	if src.revision == "" || len(bundles) == 0 {
		return r
	}
	r.current = true
	for i := range bundles {
		if !showsRevision(src, &bundles[i]) {
			r.current = false
		}
	}
	sorted := slices.Clone(bundles)
	roll := sourcepoll.RollupBundles(sorted)
	r.summary, r.ready, r.desired = roll.Summary, roll.ReadyClusters, roll.DesiredReadyClusters
	switch {
	case roll.ErrBundle != "" || roll.Summary.ErrApplied > 0:
		r.phase = failed
	case roll.Ready():
		r.phase = succeeded
	}
	r.errors = failures(sorted)
	r.partitions = partitions(sorted)
	return r
}

// showsRevision says whether a Bundle's status is that of the source's
// revision: the Bundle was written for it, and the bundle controller has
// since written its status (and its deployments) for that spec.
func showsRevision(src source, b *fleet.Bundle) bool {
	if b.Status.ObservedGeneration != b.Generation {
		return false
	}
	if src.kind == notification.KindHelmOp {
		return b.Spec.Helm != nil && b.Spec.Helm.Version == src.revision
	}
	return b.Labels[fleet.CommitLabel] == src.revision
}

// failures are the first notify.MaxErrors failures of the Bundles (sorted
// by name): broken Bundles first, then clusters that failed to apply, then
// other clusters not ready with a message.
func failures(bundles []fleet.Bundle) []notify.Failure {
	var broken, errApplied, other []notify.Failure
	for i := range bundles {
		b := &bundles[i]
		if msg, ok := sourcepoll.BundleError(b); ok {
			broken = append(broken, notify.Failure{Bundle: b.Name, Message: msg})
		}
		for _, nr := range b.Status.Summary.NonReadyResources {
			f := notify.Failure{Bundle: b.Name, Cluster: nr.Name, State: string(nr.State), Message: nr.Message}
			switch {
			case nr.State == fleet.ErrApplied:
				errApplied = append(errApplied, f)
			case nr.Message != "":
				other = append(other, f)
			}
		}
	}
	all := append(append(broken, errApplied...), other...)
	if len(all) > notify.MaxErrors {
		all = all[:notify.MaxErrors]
	}
	return all
}

// partitions are the rollout partitions named by the Bundles, in order of
// first appearance; one is reached when every Bundle that has it has all of
// its clusters ready. Bundles rolled out in one partition show none.
func partitions(bundles []fleet.Bundle) []partition {
	var out []partition
	index := map[string]int{}
	for i := range bundles {
		for _, p := range bundles[i].Status.Partitions {
			reached := p.Count > 0 && p.Summary.Ready >= p.Count
			j, ok := index[p.Name]
			if !ok {
				index[p.Name] = len(out)
				out = append(out, partition{name: p.Name, reached: reached})
				continue
			}
			out[j].reached = out[j].reached && reached
		}
	}
	return out
}

// due is one event of a rollout to tell about.
type due struct {
	// key is what status.rollouts[].sent records: the event, and for a
	// partition "PartitionReached/<name>".
	key       string
	event     notification.Event
	partition string
	// send is false for an event the Notification does not want: it is
	// recorded, not sent.
	send bool
}

// maxPartitionMessages bounds the partition messages of one rollout.
const maxPartitionMessages = notification.MaxSent - 4

// dueEvents is what is due about r given what rec says was sent, in the
// order to send it, and when to look again for a deadline (0: no deadline
// pending). Each event is told at most once per rollout, and nothing after
// Succeeded: a cluster that flaps makes at most a Failed and a Succeeded.
//
//   - Started, once the Bundles show the revision;
//   - Failed, when a cluster failed to apply or a Bundle is broken;
//   - PartitionReached for each partition reached, while there are
//     several and the whole rollout is not done;
//   - Succeeded when every cluster is ready (after a Failed too: it
//     recovered);
//   - Stalled, once, when none of those ended it within the deadline from
//     the rollout's start.
func dueEvents(r rollout, rec notification.RolloutRecord, wanted map[notification.Event]bool, now time.Time, deadline time.Duration) ([]due, time.Duration) {
	sent := map[string]bool{}
	partitionsSent := 0
	for _, k := range rec.Sent {
		sent[k] = true
		if len(k) > len(notification.EventPartitionReached) && k[:len(notification.EventPartitionReached)] == string(notification.EventPartitionReached) {
			partitionsSent++
		}
	}
	if sent[string(notification.EventSucceeded)] {
		return nil, 0
	}
	var out []due
	add := func(e notification.Event, p string) {
		key := string(e)
		if p != "" {
			key += "/" + p
		}
		if !sent[key] {
			out = append(out, due{key: key, event: e, partition: p, send: wanted[e]})
			sent[key] = true
		}
	}
	if r.current {
		add(notification.EventStarted, "")
		if r.phase == failed {
			add(notification.EventFailed, "")
		}
		if len(r.partitions) > 1 && r.phase != succeeded {
			for _, p := range r.partitions {
				if p.reached && partitionsSent < maxPartitionMessages && !sent[string(notification.EventPartitionReached)+"/"+p.name] {
					add(notification.EventPartitionReached, p.name)
					partitionsSent++
				}
			}
		}
		if r.phase == succeeded {
			add(notification.EventSucceeded, "")
			return out, 0
		}
	}
	if sent[string(notification.EventStalled)] || sent[string(notification.EventFailed)] || rec.StartedAt.IsZero() {
		return out, 0
	}
	if left := rec.StartedAt.Add(deadline).Sub(now); left > 0 {
		return out, left
	}
	add(notification.EventStalled, "")
	return out, 0
}

// wantedEvents is the set of events a Notification tells about.
func wantedEvents(events []notification.Event) map[notification.Event]bool {
	if len(events) == 0 {
		events = notification.DefaultEvents
	}
	m := map[notification.Event]bool{}
	for _, e := range events {
		m[e] = true
	}
	return m
}

// sortSources orders sources by kind and name, so the first MaxRollouts
// followed are always the same.
func sortSources(s []source) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].kind != s[j].kind {
			return s[i].kind < s[j].kind
		}
		return s[i].name < s[j].name
	})
}
