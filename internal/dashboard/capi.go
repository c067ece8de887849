package dashboard

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// ResCAPIClusters is Cluster API's Cluster kind, as "resource.group" (the
// Authorizer reads the group from it).
const ResCAPIClusters = "clusters." + "cluster.x-k8s.io"

// What the manager's Cluster API enrolment (controllers/capi) writes and
// reads on a Cluster API Cluster and its fleet Cluster; the same values as
// its constants (a test holds them equal).
const (
	capiConditionFleetAgentReady = "FleetAgentReady"
	capiEnrollLabel              = "fleet.cattle.io/enroll"
	capiUnenrolledAnnotation     = "fleet.cattle.io/unenrolled"
	capiClusterNameAnnotation    = "fleet.cattle.io/capi-cluster-name"
	capiClusterUIDAnnotation     = "fleet.cattle.io/capi-cluster-uid"
)

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

// capiServed tells whether the API server serves Cluster API's v1beta2
// Cluster, asking its discovery.
func capiServed(d discovery.DiscoveryInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(clusterv1.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Kind == "Cluster" {
			return true, nil
		}
	}
	return false, nil
}

// watchCAPI watches Cluster API's Clusters once the API server serves them,
// looking every CAPICheckInterval until then.
func (s *Server) watchCAPI(ctx context.Context, h toolscache.ResourceEventHandler) {
	tick := time.NewTicker(s.o.CAPICheckInterval)
	defer tick.Stop()
	for {
		served, err := capiServed(s.o.Discovery)
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
			Initialized: capiInitialized(c), Paused: capiPaused(c)}
		cond := meta.FindStatusCondition(c.Status.Conditions, capiConditionFleetAgentReady)
		if cond != nil {
			row.Condition, row.Message = string(cond.Status)+" "+cond.Reason, cond.Message
			row.Enrolled = cond.Status == metav1.ConditionTrue
		}
		if fc := byKey[key{c.Namespace, c.Name}]; fc != nil && enrolledFrom(fc, c) {
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
			row.Why = whyNotEnrolled(c, cond, row)
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].Namespace+"/"+rows[i].Name < rows[j].Namespace+"/"+rows[j].Name
	})
	return rows
}

// enrolledFrom tells whether the fleet Cluster fc was enrolled for the
// Cluster API Cluster c: its annotations name c (a fleet Cluster of the
// same name registered otherwise is not c's).
func enrolledFrom(fc *fleet.Cluster, c *clusterv1.Cluster) bool {
	if uid := fc.Annotations[capiClusterUIDAnnotation]; uid != "" {
		return uid == string(c.UID)
	}
	return fc.Annotations[capiClusterNameAnnotation] == c.Name
}

// whyNotEnrolled says, for a person, why c is not enrolled: its
// FleetAgentReady condition when it has one, else what keeps the manager
// from enrolling it.
func whyNotEnrolled(c *clusterv1.Cluster, cond *metav1.Condition, row CAPIRow) string {
	switch {
	case !c.DeletionTimestamp.IsZero():
		return "It is being deleted; its fleet Cluster goes with it."
	case cond != nil && cond.Message != "":
		return cond.Reason + ": " + cond.Message
	case row.Paused:
		return "It is paused (spec.paused or the cluster.x-k8s.io/paused annotation): the manager leaves it alone until it is resumed."
	case c.Labels[capiEnrollLabel] == "false":
		return "It is opted out: its label " + capiEnrollLabel + "=false keeps it from being enrolled; remove the label to enrol it."
	case c.Annotations[capiUnenrolledAnnotation] != "":
		return "It was un-enrolled (its fleet Cluster was deleted at " + c.Annotations[capiUnenrolledAnnotation] +
			"): remove the annotation " + capiUnenrolledAnnotation + " to enrol it again."
	case cond != nil:
		return cond.Reason
	}
	return "The manager has not looked at it: it has no FleetAgentReady condition. Is Cluster API enrolment on in the manager, " +
		"do its opt-in selectors (--capi-cluster-selector, --capi-namespace-selector) leave it out, " +
		"or does its namespace carry " + capiEnrollLabel + "=false?"
}

// capiInitialized tells whether the workload cluster's control plane is
// initialized, as the enrolment reads it.
func capiInitialized(c *clusterv1.Cluster) bool {
	if p := c.Status.Initialization.ControlPlaneInitialized; p != nil && *p {
		return true
	}
	return meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition)
}

// capiPaused tells whether Cluster API (and the enrolment) leaves the
// cluster alone.
func capiPaused(c *clusterv1.Cluster) bool {
	if c.Spec.Paused != nil && *c.Spec.Paused {
		return true
	}
	_, ok := c.Annotations[clusterv1.PausedAnnotation]
	return ok
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
