package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// DefaultLeaseDuration is the agent's leader lease when none is given.
const DefaultLeaseDuration = 15 * time.Second

// ErrLeaseLost is returned when another replica took the lease over: the
// process should exit so that its work stops at once.
var ErrLeaseLost = errors.New("lost the agent's leader lease")

// runElected runs run while this replica holds the Lease fleet-agent in the
// agent's own cluster, in its system namespace: of several replicas (a
// rolling update, a second pod) exactly one registers and deploys. A replica
// stopped gracefully releases the lease, so the next one starts at once.
func runElected(ctx context.Context, o Options, run func(context.Context) error) error {
	log := ctrl.LoggerFrom(ctx)
	lease := o.LeaseDuration
	if lease <= 0 {
		lease = DefaultLeaseDuration
	}
	id := o.Identity
	if id == "" {
		host, _ := os.Hostname()
		id = host + "_" + string(uuid.NewUUID())
	}
	coord, err := coordinationv1.NewForConfig(o.Local)
	if err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.Namespace, Name: fleet.AgentName},
		Client:     coord,
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	var (
		runErr error
		ran    = make(chan struct{})
		lost   bool
	)
	electCtx, stop := context.WithCancel(ctx)
	defer stop()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		Name:          fleet.AgentName,
		LeaseDuration: lease,
		RenewDeadline: lease * 2 / 3,
		RetryPeriod:   lease / 7,
		// Released below, once the work has stopped, not before.
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				defer close(ran)
				log.Info("Leading: this replica runs the agent", "identity", id)
				runErr = run(leadCtx)
				stop() // the agent ended by itself: give the lease back
			},
			// Called when Run returns, whether it led or not.
			OnStoppedLeading: func() { lost = electCtx.Err() == nil },
			OnNewLeader: func(leader string) {
				if leader != id {
					log.Info("Another replica runs the agent; waiting", "leader", leader)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("agent leader election: %w", err)
	}
	log.Info("Waiting for the agent's leader lease", "namespace", o.Namespace, "lease", fleet.AgentName, "identity", id)
	elector.Run(electCtx)
	switch {
	case lost:
		// Another replica holds the lease now: exit at once, the work
		// with it, rather than deploy alongside it.
		return ErrLeaseLost
	case !elector.IsLeader():
		return nil // stopped before it ever led
	}
	<-ran // Run returns as soon as it stops renewing; the work may still be ending
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := release(releaseCtx, lock, id); err != nil {
		log.Info("Could not release the agent's leader lease; the next replica waits for it to expire", "reason", err.Error())
	} else {
		log.Info("Released the agent's leader lease")
	}
	return runErr
}

// release gives the lease back when this replica still holds it, as
// client-go's own release does: no holder, and a one-second duration.
func release(ctx context.Context, lock *resourcelock.LeaseLock, id string) error {
	rec, _, err := lock.Get(ctx)
	if err != nil {
		return err
	}
	if rec.HolderIdentity != id {
		return nil
	}
	now := metav1.Now()
	return lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
	})
}
