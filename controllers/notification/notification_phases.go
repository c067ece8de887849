package notification

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/notify"
	"github.com/gitfleet/fleet/internal/outcome"
)

// secretRetry is how soon a Notification whose Secret is missing, or whose
// destination rejected a message, is looked at again. A change to its
// Secret brings it back at once (the Secrets' metadata is watched); this is
// for a fix made elsewhere (a token given rights on the git host).
const secretRetry = 5 * time.Minute

// scope is what one reconcile of a Notification works on.
type scope struct {
	n      *notification.Notification
	before *notification.Notification
	now    time.Time
	// followed counts the sources followed, selected the sources selected.
	followed, selected int
	// sent is set once a message was sent, sendErr when one failed.
	sent    bool
	sendErr error
	// after is when to look again (a deadline, the rate limit).
	after time.Duration
}

// Reconcile follows the rollouts of one Notification's sources, sends what
// is due and writes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	n := &notification.Notification{}
	if err := r.Client.Get(ctx, req.NamespacedName, n); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	s := &scope{n: n, before: n.DeepCopy(), now: r.Now()}
	err := r.reconcile(ctx, s)
	setConditions(s, err)
	if err == nil {
		s.n.Status.ObservedGeneration = s.n.Generation
	}
	switch {
	case err != nil, s.sendErr == nil:
	case outcome.IsStalling(s.sendErr):
		// Rejected for good: look again later, the Secret may be fixed.
		s.after = secretRetry
	default:
		err = s.sendErr // retried with backoff
	}
	res, rerr := outcome.Result(err, 0)
	if rerr == nil && s.after > 0 && (res.RequeueAfter == 0 || s.after < res.RequeueAfter) {
		res.RequeueAfter = s.after
	}
	return outcome.Written(res, rerr, outcome.PatchStatus(ctx, r.Client, s.before, s.n, outcome.WithOptimisticLock(true)))
}

// reconcile is the phases: read the sources and their rollouts, record new
// rollouts, and send what is due.
func (r *Reconciler) reconcile(ctx context.Context, s *scope) error {
	sel, err := selectorOf(s.n)
	if err != nil {
		return outcome.Stallf(notification.ReasonInvalidSpec, "spec.sources.selector: %v", err)
	}
	if s.n.Spec.Suspend {
		return nil
	}
	rollouts, err := r.rollouts(ctx, s, sel)
	if err != nil {
		return err
	}
	s.n.Status.Rollouts = records(s.n.Status.Rollouts, rollouts, s.now)
	if !anyDue(s, rollouts) {
		return nil
	}
	// Something is due: read the Notification from the API server, not
	// the cache, so that what another replica or an earlier reconcile sent
	// is known before anything is sent again.
	fresh := &notification.Notification{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.n), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading Notification %s: %w", s.n.Name, err)
	}
	s.before = fresh.DeepCopy()
	fresh.Status.Rollouts = records(fresh.Status.Rollouts, rollouts, s.now)
	fresh.Status.Conditions = s.n.Status.Conditions
	s.n = fresh
	if !anyDue(s, rollouts) {
		return nil
	}
	target, err := r.target(ctx, s.n)
	if err != nil {
		return err
	}
	return r.send(ctx, s, rollouts, target)
}

// rollouts reads the sources the Notification selects, from the cache, and
// their rollouts.
func (r *Reconciler) rollouts(ctx context.Context, s *scope, sel labels.Selector) ([]rollout, error) {
	var sources []source
	ns := s.n.Namespace
	if follows(s.n, notification.KindGitRepo) {
		list := &fleet.GitRepoList{}
		if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, fmt.Errorf("listing the GitRepos of %s: %w", ns, err)
		}
		for i := range list.Items {
			g := &list.Items[i]
			sources = append(sources, source{kind: notification.KindGitRepo, name: g.Name, revision: g.Status.Commit, repo: g.Spec.Repo})
		}
	}
	if follows(s.n, notification.KindHelmOp) {
		list := &fleet.HelmOpList{}
		if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, fmt.Errorf("listing the HelmOps of %s: %w", ns, err)
		}
		for i := range list.Items {
			h := &list.Items[i]
			repo := ""
			if h.Spec.Helm != nil {
				repo = h.Spec.Helm.Repo
			}
			sources = append(sources, source{kind: notification.KindHelmOp, name: h.Name, revision: h.Status.Version, repo: repo})
		}
	}
	sortSources(sources)
	s.selected = len(sources)
	if len(sources) > notification.MaxRollouts {
		sources = sources[:notification.MaxRollouts]
	}
	s.followed = len(sources)
	out := make([]rollout, 0, len(sources))
	for _, src := range sources {
		label := fleet.RepoLabel
		if src.kind == notification.KindHelmOp {
			label = fleet.HelmOpLabel
		}
		bundles := &fleet.BundleList{}
		if err := r.Client.List(ctx, bundles, client.InNamespace(ns), client.MatchingLabels{label: src.name}); err != nil {
			return nil, fmt.Errorf("listing the Bundles of %s %s: %w", src.kind, src.name, err)
		}
		out = append(out, observe(src, bundles.Items))
	}
	return out, nil
}

// records is the status.rollouts for the rollouts seen: a source's record
// is kept while its revision is the same, replaced (what was sent about the
// previous revision forgotten) when it changes, and dropped when the
// source is no longer followed. A source first seen with its rollout
// already over is recorded as told: no news.
func records(old []notification.RolloutRecord, rollouts []rollout, now time.Time) []notification.RolloutRecord {
	byKey := map[string]notification.RolloutRecord{}
	for _, rec := range old {
		byKey[string(rec.Kind)+"/"+rec.Name] = rec
	}
	out := make([]notification.RolloutRecord, 0, len(rollouts))
	for _, ro := range rollouts {
		if ro.revision == "" {
			continue
		}
		rec, seen := byKey[string(ro.kind)+"/"+ro.name]
		switch {
		case seen && rec.Revision == ro.revision:
		case !seen && ro.current && ro.phase == succeeded:
			rec = notification.RolloutRecord{Kind: ro.kind, Name: ro.name, Revision: ro.revision, StartedAt: metav1.NewTime(now),
				Sent: []string{string(notification.EventStarted), string(notification.EventSucceeded)}}
		default:
			rec = notification.RolloutRecord{Kind: ro.kind, Name: ro.name, Revision: ro.revision, StartedAt: metav1.NewTime(now)}
		}
		out = append(out, rec)
	}
	return out
}

// recordOf is the index of a rollout's record in rec, -1 when none.
func recordOf(recs []notification.RolloutRecord, ro rollout) int {
	for i := range recs {
		if recs[i].Kind == ro.kind && recs[i].Name == ro.name {
			return i
		}
	}
	return -1
}

// anyDue says whether any event is due, and sets s.after to the nearest
// deadline.
func anyDue(s *scope, rollouts []rollout) bool {
	found := false
	wanted := wantedEvents(s.n.Spec.Events)
	for _, ro := range rollouts {
		i := recordOf(s.n.Status.Rollouts, ro)
		if i < 0 {
			continue
		}
		d, after := dueEvents(ro, s.n.Status.Rollouts[i], wanted, s.now, deadlineOf(s.n))
		if len(d) > 0 {
			found = true
		}
		if after > 0 && (s.after == 0 || after < s.after) {
			s.after = after
		}
	}
	return found
}

// send tells the destination what is due, rollout by rollout, writing the
// status after each message (and a new rollout's record before its first):
// a crash loses no record but of the message in flight, which is sent again. It stops at the first failure (retried with backoff) and when
// the destination's rate limit is reached (looked at again when it allows).
func (r *Reconciler) send(ctx context.Context, s *scope, rollouts []rollout, target notify.Target) error {
	wanted := wantedEvents(s.n.Spec.Events)
	lim := r.limiter(client.ObjectKeyFromObject(s.n))
	for _, ro := range rollouts {
		i := recordOf(s.n.Status.Rollouts, ro)
		if i < 0 {
			continue
		}
		dues, _ := dueEvents(ro, s.n.Status.Rollouts[i], wanted, s.now, deadlineOf(s.n))
		for _, d := range dues {
			rec := &s.n.Status.Rollouts[i]
			if d.send {
				res := lim.ReserveN(s.now, 1)
				if wait := res.DelayFrom(s.now); wait > 0 {
					res.CancelAt(s.now)
					s.after = wait
					return nil
				}
				if !recorded(s.before, ro) {
					// A new rollout's record is written before its first
					// message: a crash after sending finds it and tells
					// what it lacks again (with the same message ID),
					// instead of taking a rollout that ended meanwhile as
					// told already.
					if err := outcome.PatchStatus(ctx, r.Client, s.before, s.n, outcome.WithOptimisticLock(true)); err != nil {
						return err
					}
					s.before = s.n.DeepCopy()
					// The patch gave s.n its new resourceVersion.
					rec = &s.n.Status.Rollouts[i]
				}
				t := target
				t.RepoURL = ro.repo
				err := r.Sender.Send(ctx, t, message(s.n, ro, *rec, d, s.now, target.Type))
				if err != nil && !errors.Is(err, notify.ErrNotApplicable) {
					s.sendErr = fmt.Errorf("telling %s about %s %s of %s %s: %w", target.Type, d.key, notify.ShortRevision(ro.revision), ro.kind, ro.name, err)
					return nil
				}
				if err == nil {
					s.sent = true
					rec.LastSentAt = &metav1.Time{Time: s.now}
				}
			}
			rec.Sent = appendBounded(rec.Sent, d.key)
			if d.send {
				if err := outcome.PatchStatus(ctx, r.Client, s.before, s.n, outcome.WithOptimisticLock(true)); err != nil {
					return err
				}
				s.before = s.n.DeepCopy()
			}
		}
	}
	return nil
}

// recorded says whether n's status holds the record of ro's revision.
func recorded(n *notification.Notification, ro rollout) bool {
	i := recordOf(n.Status.Rollouts, ro)
	return i >= 0 && n.Status.Rollouts[i].Revision == ro.revision
}

// appendBounded appends key to sent, keeping at most MaxSent keys (the
// oldest partitions go first: the terminal events are what must stay).
func appendBounded(sent []string, key string) []string {
	sent = append(sent, key)
	for len(sent) > notification.MaxSent {
		sent = sent[1:]
	}
	return sent
}

// message is what is told about event d of rollout ro.
func message(n *notification.Notification, ro rollout, rec notification.RolloutRecord, d due, now time.Time, dest notification.DestinationType) *notify.Message {
	sum := ro.summary
	m := &notify.Message{
		Version: notify.SchemaVersion, ID: messageID(n, ro, d), Event: string(d.event), Namespace: n.Namespace,
		Kind: string(ro.kind), Name: ro.name, Revision: ro.revision, Repo: ro.repo, Partition: d.partition,
		StartedAt: rec.StartedAt.UTC(), Time: now.UTC(),
		Clusters: notify.Clusters{Desired: ro.desired, Ready: ro.ready},
		Deployments: notify.Counts{Desired: sum.DesiredReady, Ready: sum.Ready, NotReady: sum.NotReady, WaitApplied: sum.WaitApplied,
			ErrApplied: sum.ErrApplied, OutOfSync: sum.OutOfSync, Modified: sum.Modified, Pending: sum.Pending},
	}
	if ro.kind == notification.KindGitRepo {
		m.CommitURL = notify.CommitURL(dest, ro.repo, ro.revision)
	}
	if d.event == notification.EventFailed || d.event == notification.EventStalled {
		m.Errors = ro.errors
	}
	m.Text = notify.Summary(m)
	return m
}

// messageID is the same for the same event of the same rollout of the same
// Notification, whichever replica sends it.
func messageID(n *notification.Notification, ro rollout, d due) string {
	h := sha256.Sum256([]byte(string(n.UID) + "\x00" + string(ro.kind) + "\x00" + ro.name + "\x00" + ro.revision + "\x00" + d.key))
	return hex.EncodeToString(h[:16])
}

// target reads the destination and its Secret.
func (r *Reconciler) target(ctx context.Context, n *notification.Notification) (notify.Target, error) {
	d := n.Spec.Destination
	t := notify.Target{Type: d.Type, Address: d.Address, Context: d.Context}
	if d.SecretRef == nil {
		return t, nil
	}
	sec := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: d.SecretRef.Name}, sec)
	switch {
	case apierrors.IsNotFound(err):
		return t, outcome.Wait(notification.ReasonSecretNotFound, secretRetry,
			fmt.Errorf("secret %s/%s (spec.destination.secretRef) does not exist: create it in the Notification's namespace", n.Namespace, d.SecretRef.Name))
	case err != nil:
		return t, fmt.Errorf("reading secret %s/%s: %w", n.Namespace, d.SecretRef.Name, err)
	}
	if a := sec.Data[notification.SecretKeyAddress]; len(a) > 0 {
		t.Address = string(a)
	}
	t.Token = string(sec.Data[notification.SecretKeyToken])
	t.Username = string(sec.Data[notification.SecretKeyUsername])
	t.Password = string(sec.Data[notification.SecretKeyPassword])
	t.HMACKey = sec.Data[notification.SecretKeyHMAC]
	return t, nil
}

// deadlineOf is the Notification's stall deadline.
func deadlineOf(n *notification.Notification) time.Duration {
	if d := n.Spec.StallDeadline; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return DefaultStallDeadline
}

// follows says whether n follows sources of kind.
func follows(n *notification.Notification, kind notification.SourceKind) bool {
	if len(n.Spec.Sources.Kinds) == 0 {
		return true
	}
	for _, k := range n.Spec.Sources.Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// selectorOf is n's source selector; none selects everything.
func selectorOf(n *notification.Notification) (labels.Selector, error) {
	if n.Spec.Sources.Selector == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(n.Spec.Sources.Selector)
}
