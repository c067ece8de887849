package metrics

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
)

// Defaults of LimiterOptions.
const (
	DefaultEventBurst    = 5
	DefaultEventInterval = 5 * time.Minute
	DefaultEventQPS      = 10
)

// LimiterOptions bound the events the manager records.
type LimiterOptions struct {
	// Burst is how many events one object may get at once (default 5);
	// after that it gets one per Interval (default 5m), as Kubernetes' own
	// event spam filter refills.
	Burst    int
	Interval time.Duration
	// QPS caps the events of all objects together, with a burst of ten
	// seconds' worth (default 10/s).
	QPS float64
}

func (o LimiterOptions) withDefaults() LimiterOptions {
	if o.Burst <= 0 {
		o.Burst = DefaultEventBurst
	}
	if o.Interval <= 0 {
		o.Interval = DefaultEventInterval
	}
	if o.QPS <= 0 {
		o.QPS = DefaultEventQPS
	}
	return o
}

// bucket is a token bucket: tokens refill at rate per second up to burst.
type bucket struct {
	tokens float64
	at     time.Time
}

func (b *bucket) refill(now time.Time, rate, burst float64) {
	if d := now.Sub(b.at).Seconds(); d > 0 {
		b.tokens = min(burst, b.tokens+d*rate)
	}
	b.at = now
}

// Limiter decides which events are recorded: a burst per object, then one
// per interval, and a cap over all objects. Objects are told apart by UID.
type Limiter struct {
	o LimiterOptions
	// Now is the clock (time.Now by default); tests set it.
	Now func() time.Time

	mu        sync.Mutex
	objects   map[types.UID]*bucket
	global    bucket
	lastPrune time.Time
}

// NewLimiter returns a Limiter with o (zero fields take the defaults).
func NewLimiter(o LimiterOptions) *Limiter {
	o = o.withDefaults()
	return &Limiter{o: o, Now: time.Now, objects: map[types.UID]*bucket{},
		global: bucket{tokens: o.QPS * 10}}
}

// Allow tells whether an event about the object uid may be recorded now,
// and takes it from the object's and the global budget when so.
func (l *Limiter) Allow(uid types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.Now()
	if l.global.at.IsZero() {
		l.global.at = now
	}
	perObject := 1 / l.o.Interval.Seconds()
	l.prune(now, perObject)
	b, ok := l.objects[uid]
	if !ok {
		b = &bucket{tokens: float64(l.o.Burst), at: now}
		l.objects[uid] = b
	}
	b.refill(now, perObject, float64(l.o.Burst))
	l.global.refill(now, l.o.QPS, l.o.QPS*10)
	switch {
	case b.tokens < 1:
		EventsDropped.WithLabelValues("object").Inc()
		return false
	case l.global.tokens < 1:
		EventsDropped.WithLabelValues("global").Inc()
		return false
	}
	b.tokens--
	l.global.tokens--
	return true
}

// prune forgets, once per interval, the objects whose burst is whole again:
// they are as new, and the map stays as small as the objects that had
// events lately. The caller holds l.mu.
func (l *Limiter) prune(now time.Time, rate float64) {
	if now.Sub(l.lastPrune) < l.o.Interval {
		return
	}
	l.lastPrune = now
	for uid, b := range l.objects {
		if b.tokens+now.Sub(b.at).Seconds()*rate >= float64(l.o.Burst) {
			delete(l.objects, uid)
		}
	}
}

// Forget drops what the Limiter knows of the object uid (it was deleted).
func (l *Limiter) Forget(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.objects, uid)
}

// Tracked is the number of objects the Limiter holds a budget for.
func (l *Limiter) Tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.objects)
}

// Recorder returns next limited by l: an event the Limiter does not allow
// is dropped (and counted in fleet_events_dropped_total).
func (l *Limiter) Recorder(next events.EventRecorder) events.EventRecorder {
	return &limitedRecorder{next: next, l: l}
}

type limitedRecorder struct {
	next events.EventRecorder
	l    *Limiter
}

// Eventf records the event when the Limiter allows it.
func (r *limitedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	if r.l.Allow(keyOf(regarding)) {
		r.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}
}

// keyOf is the object's UID, or its namespace/name when it has none.
func keyOf(obj runtime.Object) types.UID {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	if uid := m.GetUID(); uid != "" {
		return uid
	}
	return types.UID(m.GetNamespace() + "/" + m.GetName())
}
