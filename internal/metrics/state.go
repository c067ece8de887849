package metrics

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Unknown is the state label of an object whose state is not computed yet
// (a GitRepo or Bundle its controller has not summarized).
const Unknown = "Unknown"

// Kind says how to track the state of one kind of object.
type Kind struct {
	// Name is the kind, e.g. "GitRepo".
	Name string
	// Metric and Help name and explain its gauge.
	Metric, Help string
	// Namespaced gauges carry a namespace label.
	Namespaced bool
	// States are the states shown, with 0, for every namespace that holds
	// objects of the kind, so that a transition reads as 1 -> 0 and 0 -> 1.
	States []string
	// New returns an empty object of the kind, for its informer.
	New func() client.Object
	// State is the state of obj ("" when not computed yet).
	State func(obj client.Object) string
	// EventState, when set, is the state whose changes are recorded as
	// events; "" when obj's current state says nothing (the last one is
	// kept). Nil: no events for the kind.
	EventState func(obj client.Object) string
	// Note explains obj's state in an event.
	Note func(obj client.Object) string
}

var bundleStates = []string{string(fleet.Ready), string(fleet.NotReady), string(fleet.WaitApplied), string(fleet.ErrApplied),
	string(fleet.OutOfSync), string(fleet.Pending), string(fleet.Modified)}

// gaugeKey is one series of a kind's gauge.
type gaugeKey struct{ namespace, state string }

// seen is what a Tracker remembers of one object.
type seen struct {
	namespace, state, event string
	uid                     types.UID
}

// Tracker keeps the counts of one kind by namespace and state, from the
// changes its informer reports, and records an event when an object's
// event state changes. Its methods are the informer's event handler.
type Tracker struct {
	kind *Kind
	// recorder, when set, records the state events; forget is called with
	// an object's UID when it is deleted (the Limiter's per-object state).
	recorder events.EventRecorder
	forget   func(types.UID)

	mu     sync.Mutex
	last   map[types.NamespacedName]seen
	counts map[gaugeKey]int
	// perNamespace counts the objects of each namespace, to show the zero
	// series of namespaces that hold objects only.
	perNamespace map[string]int
}

// NewTracker returns an empty Tracker for kind. recorder and forget may be
// nil.
func NewTracker(kind *Kind, recorder events.EventRecorder, forget func(types.UID)) *Tracker {
	return &Tracker{kind: kind, recorder: recorder, forget: forget,
		last: map[types.NamespacedName]seen{}, counts: map[gaugeKey]int{}, perNamespace: map[string]int{}}
}

var _ toolscache.ResourceEventHandler = &Tracker{}

// OnAdd counts a new object. An object already counted (an informer's
// relist) is treated as an update.
func (t *Tracker) OnAdd(obj interface{}, _ bool) {
	start := time.Now()
	if o, ok := obj.(client.Object); ok {
		t.observe(o)
	}
	updateNanos.Add(int64(time.Since(start)))
}

// OnUpdate moves an object from the state it was last seen in to its new
// one. The last state comes from the Tracker's own memory, not from old,
// so that a missed or repeated notification cannot skew the counts.
func (t *Tracker) OnUpdate(_, obj interface{}) {
	start := time.Now()
	if o, ok := obj.(client.Object); ok {
		t.observe(o)
	}
	updateNanos.Add(int64(time.Since(start)))
}

// OnDelete uncounts an object, also when the informer only knows its key
// (a deletion missed while the watch was down).
func (t *Tracker) OnDelete(obj interface{}) {
	start := time.Now()
	var key types.NamespacedName
	switch o := obj.(type) {
	case client.Object:
		key = types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
	case toolscache.DeletedFinalStateUnknown:
		ns, name, err := toolscache.SplitMetaNamespaceKey(o.Key)
		if err != nil {
			return
		}
		key = types.NamespacedName{Namespace: ns, Name: name}
	default:
		return
	}
	t.mu.Lock()
	was, ok := t.last[key]
	if ok {
		delete(t.last, key)
		t.move(was, nil)
	}
	t.mu.Unlock()
	if ok && t.forget != nil && was.uid != "" {
		t.forget(was.uid)
	}
	updateNanos.Add(int64(time.Since(start)))
}

// observe records obj's state, and an event when its event state changed.
func (t *Tracker) observe(obj client.Object) {
	now := seen{state: t.kind.State(obj), uid: obj.GetUID()}
	if now.state == "" {
		now.state = Unknown
	}
	if t.kind.Namespaced {
		now.namespace = obj.GetNamespace()
	}
	if t.kind.EventState != nil {
		now.event = t.kind.EventState(obj)
	}
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	t.mu.Lock()
	was, known := t.last[key]
	if now.event == "" && was.uid == now.uid {
		// Nothing new to say: keep the state the next change is told from.
		now.event = was.event
	}
	if !known || was != now {
		t.last[key] = now
		if !known {
			t.move(seen{}, &now)
		} else if was.state != now.state {
			t.move(was, &now)
		}
	}
	t.mu.Unlock()
	// A recreated object (new UID) starts over, and the first sight of an
	// object (a start, a new leader) is no change. Only a change into or
	// out of a state that asks for attention is news: the steps of every
	// rollout (WaitApplied, Ready) are for the gauges, not for 2000 events.
	if known && was.uid == now.uid && was.event != "" && was.event != now.event && t.recorder != nil &&
		(warningState(was.event) || warningState(now.event)) {
		t.record(obj, was.event, now.event)
	}
}

// move uncounts was (unless it is the zero seen) and counts now (unless
// nil). The caller holds t.mu.
func (t *Tracker) move(was seen, now *seen) {
	if was.state != "" {
		k := gaugeKey{was.namespace, was.state}
		if t.counts[k]--; t.counts[k] <= 0 {
			delete(t.counts, k)
		}
		if t.perNamespace[was.namespace]--; t.perNamespace[was.namespace] <= 0 {
			delete(t.perNamespace, was.namespace)
		}
	}
	if now != nil {
		t.counts[gaugeKey{now.namespace, now.state}]++
		t.perNamespace[now.namespace]++
	}
}

// record records the change of obj's state from was to now.
func (t *Tracker) record(obj client.Object, was, now string) {
	kind := corev1.EventTypeNormal
	if warningState(now) {
		kind = corev1.EventTypeWarning
	}
	note := fmt.Sprintf("%s state changed from %s to %s", t.kind.Name, was, now)
	if t.kind.Note != nil {
		if n := t.kind.Note(obj); n != "" {
			note += ": " + n
		}
	}
	if len(note) > 1024 {
		note = note[:1024] + "..."
	}
	t.recorder.Eventf(obj, nil, kind, fleet.ReasonStateChanged, "Summarize", "%s", note)
}

// warningState tells whether a state asks for someone's attention.
func warningState(s string) bool {
	switch s {
	case string(fleet.ErrApplied), string(fleet.NotReady), string(fleet.Modified), fleet.ClusterStateOffline:
		return true
	}
	return false
}

// Counts returns a copy of the counts by namespace and state ("" namespace
// for kinds that are not namespaced).
func (t *Tracker) Counts() map[string]map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]map[string]int{}
	for k, n := range t.counts {
		if out[k.namespace] == nil {
			out[k.namespace] = map[string]int{}
		}
		out[k.namespace][k.state] = n
	}
	return out
}

// stateCollector serves the gauges of the live Trackers at scrape time.
// Trackers of one kind add up (two managers in one test process).
type stateCollector struct {
	mu       sync.Mutex
	trackers map[*Tracker]struct{}
}

var collector = &stateCollector{trackers: map[*Tracker]struct{}{}}

// descs are the gauges' descriptions, by kind name.
var descs = func() map[string]*prometheus.Desc {
	out := map[string]*prometheus.Desc{}
	for _, k := range Kinds() {
		labels := []string{"state"}
		if k.Namespaced {
			labels = []string{"namespace", "state"}
		}
		out[k.Name] = prometheus.NewDesc(k.Metric, k.Help, labels, nil)
	}
	return out
}()

func (c *stateCollector) add(t *Tracker) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trackers[t] = struct{}{}
}

func (c *stateCollector) remove(t *Tracker) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.trackers, t)
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: per kind, every known state of
// every namespace that holds objects (0 when none is in it), and any other
// state that some object is in.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	trackers := make([]*Tracker, 0, len(c.trackers))
	for t := range c.trackers {
		trackers = append(trackers, t)
	}
	c.mu.Unlock()
	byKind := map[*Kind]map[gaugeKey]int{}
	nsByKind := map[*Kind]map[string]bool{}
	for _, t := range trackers {
		if byKind[t.kind] == nil {
			byKind[t.kind], nsByKind[t.kind] = map[gaugeKey]int{}, map[string]bool{}
		}
		t.mu.Lock()
		for k, n := range t.counts {
			byKind[t.kind][k] += n
		}
		for ns := range t.perNamespace {
			nsByKind[t.kind][ns] = true
		}
		t.mu.Unlock()
	}
	for kind, counts := range byKind {
		if !kind.Namespaced {
			nsByKind[kind][""] = true
		}
		for ns := range nsByKind[kind] {
			for _, st := range kind.States {
				if _, ok := counts[gaugeKey{ns, st}]; !ok {
					counts[gaugeKey{ns, st}] = 0
				}
			}
		}
		keys := make([]gaugeKey, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			return keys[i].namespace < keys[j].namespace || keys[i].namespace == keys[j].namespace && keys[i].state < keys[j].state
		})
		for _, k := range keys {
			labels := []string{k.state}
			if kind.Namespaced {
				labels = []string{k.namespace, k.state}
			}
			ch <- prometheus.MustNewConstMetric(descs[kind.Name], prometheus.GaugeValue, float64(counts[k]), labels...)
		}
	}
}
