package metrics

import (
	"fmt"
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func cluster(ns, name, uid, state string) *fleet.Cluster {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
	c.Status.Display.State = state
	return c
}

// scrape gathers the gauges of the given Trackers as a registry would serve
// them, keyed "namespace/state" (or "state").
func scrape(t *testing.T, metric string, trackers ...*Tracker) map[string]float64 {
	t.Helper()
	c := &stateCollector{trackers: map[*Tracker]struct{}{}}
	for _, tr := range trackers {
		c.add(tr)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				if key != "" {
					key += "/"
				}
				key += l.GetValue()
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// want is what the gauges must say of the objects that exist: every known
// state of each namespace holding objects (0 when none is in it), and the
// other states objects are in.
func want(kind *Kind, objs map[string]*fleet.Cluster) map[string]float64 {
	out := map[string]float64{}
	for _, o := range objs {
		for _, st := range kind.States {
			if _, ok := out[o.Namespace+"/"+st]; !ok {
				out[o.Namespace+"/"+st] = 0
			}
		}
	}
	for _, o := range objs {
		st := o.Status.Display.State
		if st == "" {
			st = Unknown
		}
		out[o.Namespace+"/"+st]++
	}
	return out
}

// TestGaugesStayExact drives a Tracker with what an informer may deliver —
// adds, updates, resyncs (old == new), relists (an add or an update from a
// stale old for an object already counted), deletes with the object or only
// its key (a tombstone), a delete repeated — and checks after every step
// that the gauges count exactly the objects that exist.
func TestGaugesStayExact(t *testing.T) {
	g := NewWithT(t)
	rng := rand.New(rand.NewPCG(1, 2))
	states := append(append([]string{}, Clusters.States...), "", "SomethingNew")
	tr := NewTracker(Clusters, nil, nil)
	live := map[string]*fleet.Cluster{}
	stale := map[string]*fleet.Cluster{} // what an informer may still hold
	next := 0
	pick := func() *fleet.Cluster {
		for _, o := range live {
			return o
		}
		return nil
	}
	for step := range 3000 {
		var did string
		switch op := rng.IntN(8); {
		case op == 0 || len(live) == 0:
			next++
			o := cluster(fmt.Sprintf("ns-%d", rng.IntN(4)), fmt.Sprintf("c-%d", next), fmt.Sprintf("uid-%d", next), states[rng.IntN(len(states))])
			live[o.Name], stale[o.Name] = o, o
			tr.OnAdd(o, false)
			did = "add " + o.Name
		case op == 1: // update
			o := pick()
			n := o.DeepCopy()
			n.Status.Display.State = states[rng.IntN(len(states))]
			live[o.Name] = n
			tr.OnUpdate(o, n)
			did = "update " + o.Name
		case op == 2: // resync
			o := pick()
			tr.OnUpdate(o, o)
			did = "resync " + o.Name
		case op == 3: // relist: changes missed, then the object as an add
			o := pick()
			n := o.DeepCopy()
			n.Status.Display.State = states[rng.IntN(len(states))]
			live[o.Name] = n
			tr.OnAdd(n, false)
			did = "relist add " + o.Name
		case op == 4: // relist: an update whose old is stale
			o := pick()
			n := o.DeepCopy()
			n.Status.Display.State = states[rng.IntN(len(states))]
			live[o.Name] = n
			tr.OnUpdate(stale[o.Name], n)
			did = "relist update " + o.Name
		case op == 5: // delete
			o := pick()
			delete(live, o.Name)
			tr.OnDelete(o)
			tr.OnDelete(o) // a repeated delete changes nothing
			did = "delete " + o.Name
		case op == 6: // a deletion missed while the watch was down
			o := pick()
			delete(live, o.Name)
			tr.OnDelete(toolscache.DeletedFinalStateUnknown{Key: o.Namespace + "/" + o.Name, Obj: stale[o.Name]})
			did = "tombstone " + o.Name
		case op == 7: // deleted and made again under the same name
			o := pick()
			tr.OnDelete(o)
			next++
			n := cluster(o.Namespace, o.Name, fmt.Sprintf("uid-%d", next), states[rng.IntN(len(states))])
			live[o.Name], stale[o.Name] = n, n
			tr.OnAdd(n, false)
			did = "recreate " + o.Name
		}
		g.Expect(scrape(t, "fleet_clusters", tr)).To(Equal(want(Clusters, live)), "step %d: %s", step, did)
	}
	// All gone: no series left, not even zeros.
	for _, o := range live {
		tr.OnDelete(o)
	}
	g.Expect(scrape(t, "fleet_clusters", tr)).To(BeEmpty())
	g.Expect(tr.last).To(BeEmpty())
}

func TestBundleDeploymentsHaveNoNamespaceLabel(t *testing.T) {
	g := NewWithT(t)
	tr := NewTracker(BundleDeployments, nil, nil)
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-x", Name: "b"}}
	bd.Spec.DeploymentID = "s-1:a"
	tr.OnAdd(bd, true)
	got := scrape(t, "fleet_bundledeployments", tr)
	g.Expect(got).To(HaveKeyWithValue(string(fleet.WaitApplied), 1.0))
	g.Expect(got).To(HaveKeyWithValue(string(fleet.Ready), 0.0))
	g.Expect(got).To(HaveLen(len(bundleStates)))
	done := bd.DeepCopy()
	done.Status.AppliedDeploymentID, done.Status.Ready, done.Status.NonModified = "s-1:a", true, true
	done.Spec.StagedDeploymentID = "s-1:a"
	tr.OnUpdate(bd, done)
	got = scrape(t, "fleet_bundledeployments", tr)
	g.Expect(got).To(HaveKeyWithValue(string(fleet.WaitApplied), 0.0))
	g.Expect(got).To(HaveKeyWithValue(string(fleet.Ready), 1.0))
}

func TestTrackersOfOneKindAddUp(t *testing.T) {
	g := NewWithT(t)
	a, b := NewTracker(Clusters, nil, nil), NewTracker(Clusters, nil, nil)
	a.OnAdd(cluster("ns", "a", "1", "Ready"), false)
	b.OnAdd(cluster("ns", "b", "2", "Ready"), false)
	g.Expect(scrape(t, "fleet_clusters", a, b)).To(HaveKeyWithValue("ns/Ready", 2.0))
}
