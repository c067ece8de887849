package metrics

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Recorders are the event recorders of the state events by kind name
// ("GitRepo", "Bundle", "Cluster"), already limited; a kind without one
// records none.
type Recorders map[string]events.EventRecorder

// Setup adds to mgr the state gauges' handlers and state events: they start
// when this replica becomes the leader, so one replica counts and records.
func Setup(mgr ctrl.Manager, l *Limiter, recorders Recorders) error {
	return mgr.Add(&runner{cache: mgr.GetCache(), limiter: l, recorders: recorders})
}

type runner struct {
	cache     cache.Cache
	limiter   *Limiter
	recorders Recorders
}

// NeedLeaderElection: only the leader counts and records.
func (r *runner) NeedLeaderElection() bool { return true }

// Start adds one Tracker per kind to the kind's informer, which first hands
// it every object it holds, then every change, and serves the Trackers'
// counts until ctx ends.
func (r *runner) Start(ctx context.Context) (err error) {
	var cleanups []func() error
	defer func() {
		for _, c := range cleanups {
			err = errors.Join(err, c())
		}
	}()
	for _, k := range Kinds() {
		inf, err := r.cache.GetInformer(ctx, k.New())
		if err != nil {
			return fmt.Errorf("getting the %s informer for the state metrics: %w", k.Name, err)
		}
		var forget func(uid types.UID)
		if r.limiter != nil {
			forget = r.limiter.Forget
		}
		t := NewTracker(k, r.recorders[k.Name], forget)
		reg, err := inf.AddEventHandler(t)
		if err != nil {
			return fmt.Errorf("watching %ss for the state metrics: %w", k.Name, err)
		}
		collector.add(t)
		cleanups = append(cleanups, func() error {
			collector.remove(t)
			return inf.RemoveEventHandler(reg)
		})
	}
	<-ctx.Done()
	return nil
}
