package capi

import (
	"context"
	"time"

	"k8s.io/client-go/discovery"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gitfleet/fleet/internal/capienroll"
)

// DefaultInstallCheckInterval is how often a manager started without
// Cluster API looks for it.
const DefaultInstallCheckInterval = 30 * time.Second

// WhenInstalled is a manager Runnable for a manager started where Cluster
// API is not installed: it asks the API server's discovery every Interval
// whether Cluster API's v1beta2 Cluster is served, and once it is, calls
// Setup (which adds the controller to the running manager) and ends. So
// installing Cluster API after the manager turns enrollment on without a
// restart. Every replica looks; the controller it adds runs on the leader
// only, as every controller does.
type WhenInstalled struct {
	// Discovery asks the API server what it serves.
	Discovery discovery.DiscoveryInterface
	// Interval between looks (default DefaultInstallCheckInterval).
	Interval time.Duration
	// Setup sets the controller up with the manager.
	Setup func(context.Context) error
}

// NeedLeaderElection is false: only the looking runs here.
func (w *WhenInstalled) NeedLeaderElection() bool { return false }

// Start looks until Cluster API is served, sets up the controller and
// returns; it returns nil when stopped before that, and Setup's error
// when that fails (which stops the manager, as a failing Setup at
// start does).
func (w *WhenInstalled) Start(ctx context.Context) error {
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultInstallCheckInterval
	}
	log := ctrl.LoggerFrom(ctx).WithValues("groupVersion", clusterv1.GroupVersion.String())
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		served, err := capienroll.Served(w.Discovery)
		switch {
		case err != nil:
			log.V(1).Info("Looking for Cluster API", "error", err.Error())
		case served:
			log.Info("Cluster API is installed now; turning Cluster API enrollment on")
			return w.Setup(ctx)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
