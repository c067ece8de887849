package dashboard

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/capienroll"
)

// ResCAPIClusters is Cluster API's Cluster kind, as "resource.group" (the
// Authorizer reads the group from it).
const ResCAPIClusters = "clusters." + "cluster.x-k8s.io"

// CAPICheckInterval is how often a server whose API server does not serve
// Cluster API yet looks again.
const CAPICheckInterval = 30 * time.Second

// capiWatch is whether the server watches Cluster API's Clusters, or why
// not.
type capiWatch struct {
	mu       sync.Mutex
	watching bool
	note     string
}

func (w *capiWatch) get() (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.watching, w.note
}

func (w *capiWatch) set(watching bool, note string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watching, w.note = watching, note
}

// notServed is the note shown while the API server does not serve Cluster
// API's Cluster kind.
const notServed = "Cluster API is not installed on this cluster: its API server does not serve " +
	"cluster.x-k8s.io/v1beta2 Clusters. Clusters made with Cluster API show here once it is (and the manager enrols them)."

// watchCAPI watches Cluster API's Clusters once the API server serves them,
// looking every CAPICheckInterval until then.
func (s *Server) watchCAPI(ctx context.Context, h toolscache.ResourceEventHandler) {
	tick := time.NewTicker(s.o.CAPICheckInterval)
	defer tick.Stop()
	for {
		served, err := capienroll.Served(s.o.Discovery)
		switch {
		case err != nil:
			s.capi.set(false, "Whether Cluster API is installed could not be told now ("+err.Error()+"); the dashboard looks again shortly.")
		case !served:
			s.capi.set(false, notServed)
		default:
			inf, err := s.o.Cache.GetInformer(ctx, &clusterv1.Cluster{})
			if err == nil {
				_, err = inf.AddEventHandler(h)
			}
			if err == nil {
				s.capi.set(true, "")
				s.hub.changed()
				return
			}
			if ctx.Err() != nil {
				return
			}
			ctrl.LoggerFrom(ctx).Error(err, "Watching Cluster API's Clusters")
			s.capi.set(false, "Cluster API's Clusters could not be watched ("+err.Error()+"); the dashboard tries again shortly.")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// CAPIPage is what the Cluster API page shows.
type CAPIPage struct {
	Rows []CAPIRow
	// Note says why nothing or not everything is shown (not installed, not
	// allowed), when so.
	Note string
}

// CAPIRow is a Cluster API Cluster and its enrolment.
type CAPIRow struct {
	Namespace, Name, Phase string
	Initialized, Paused    bool
	// Enrolled is FleetAgentReady True: its fleet agent checks in.
	Enrolled bool
	// Condition is FleetAgentReady as "Status Reason", Message its
	// message; both empty without one.
	Condition, Message string
	// FleetNamespace and FleetName name the fleet Cluster it became, when
	// there is one the user may see.
	FleetNamespace, FleetName string
	// Why says why it is not enrolled (yet); empty when it is.
	Why string
	// Class is the CSS class of the enrolment's badge.
	Class string
}

// BuildCAPIRows computes the Cluster API page's rows from the Cluster API
// Clusters and the fleet Clusters the user may see.
func BuildCAPIRows(capis []clusterv1.Cluster, fleets []fleet.Cluster) []CAPIRow {
	byKey := map[key]*fleet.Cluster{}
	for i := range fleets {
		byKey[key{fleets[i].Namespace, fleets[i].Name}] = &fleets[i]
	}
	rows := make([]CAPIRow, 0, len(capis))
	for i := range capis {
		c := &capis[i]
		row := CAPIRow{Namespace: c.Namespace, Name: c.Name, Phase: c.Status.Phase,
			Initialized: capienroll.Initialized(c), Paused: capienroll.Paused(c)}
		cond := capienroll.Condition(c)
		if cond != nil {
			row.Condition, row.Message = string(cond.Status)+" "+cond.Reason, cond.Message
			row.Enrolled = cond.Status == metav1.ConditionTrue
		}
		if fc := byKey[key{c.Namespace, c.Name}]; fc != nil && capienroll.EnrolledFrom(fc, c) {
			row.FleetNamespace, row.FleetName = fc.Namespace, fc.Name
		}
		row.Class = "none"
		switch {
		case row.Enrolled:
			row.Class = "ok"
		case cond != nil && (cond.Reason == fleet.ReasonFailed || cond.Reason == fleet.ReasonAgentSilent):
			row.Class = "err"
		case cond != nil:
			row.Class = "wait"
		}
		if !row.Enrolled {
			row.Why = capienroll.WhyNot(c)
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].Namespace+"/"+rows[i].Name < rows[j].Namespace+"/"+rows[j].Name
	})
	return rows
}

// capiClusters reads the Cluster API Clusters u may list, or says why none
// are shown.
func (s *Server) capiClusters(ctx context.Context, u *User) ([]clusterv1.Cluster, string, error) {
	watching, note := s.capi.get()
	if !watching {
		if note == "" {
			note = "Cluster API clusters are not watched by this dashboard."
		}
		return nil, note, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	items, err := readAllowed[clusterv1.Cluster](ctx, s, u, ResCAPIClusters, &clusterv1.ClusterList{},
		func(l *clusterv1.ClusterList) []clusterv1.Cluster { return l.Items })
	if err != nil {
		return nil, "", err
	}
	if len(items) == 0 {
		all, err := s.o.Authorizer.CanList(ctx, u, ResCAPIClusters, "")
		if err != nil {
			return nil, "", err
		}
		if !all {
			return nil, "No Cluster API cluster that you may list: listing them needs the right to list " +
				"clusters.cluster.x-k8s.io in their namespaces.", nil
		}
	}
	return items, "", nil
}

func (s *Server) capiPage(ctx context.Context, u *User, snap *Snapshot) (CAPIPage, error) {
	items, note, err := s.capiClusters(ctx, u)
	if err != nil {
		return CAPIPage{}, fmt.Errorf("reading Cluster API's Clusters: %w", err)
	}
	return CAPIPage{Rows: BuildCAPIRows(items, snap.Clusters), Note: note}, nil
}
