package dump

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/diagnose"
	"github.com/gitfleet/fleet/internal/names"
)

// Filter narrows a dump; empty fields select everything.
type Filter struct {
	// Namespace is a workspace: its GitRepos, HelmOps, Bundles, Clusters and
	// the BundleDeployments in its Clusters' namespaces.
	Namespace string `json:"namespace,omitempty"`
	// GitRepo keeps that GitRepo and its Bundles and BundleDeployments.
	GitRepo string `json:"gitrepo,omitempty"`
	// Bundle keeps that Bundle and its BundleDeployments.
	Bundle string `json:"bundle,omitempty"`
	// Cluster keeps that Cluster, its BundleDeployments and the Bundles
	// they come from.
	Cluster string `json:"cluster,omitempty"`
}

// Archive is what a dump holds.
type Archive struct {
	Snapshot diagnose.Snapshot
	Filter   Filter
	Events   []corev1.Event
	// Metrics is the manager's /metrics text, when it was fetched.
	Metrics []byte
	// MetricsError says why the metrics are missing, when they were asked for.
	MetricsError string
}

// Options of Collect.
type Options struct {
	Filter
	// MetricsURL is the manager's metrics endpoint; empty: none fetched.
	MetricsURL string
	// Now is when the dump is taken (time.Now when zero).
	Now time.Time
}

// listPerClusterNamespace lists into list the objects of the cluster
// namespaces of clusters the caller may read; Forbidden when it may read
// none of them.
func listPerClusterNamespace(ctx context.Context, c client.Client, clusters []fleet.Cluster, list client.ObjectList, opts []client.ListOption) error {
	var items []runtime.Object
	readable := false
	for i := range clusters {
		cl := &clusters[i]
		ns := names.ClusterNamespaceFor(cl.Namespace, cl.Name, cl.Status.Namespace)
		one := list.DeepCopyObject().(client.ObjectList)
		err := c.List(ctx, one, append(append([]client.ListOption(nil), opts...), client.InNamespace(ns))...)
		if apierrors.IsForbidden(err) {
			continue
		}
		if err != nil {
			return err
		}
		readable = true
		got, err := meta.ExtractList(one)
		if err != nil {
			return err
		}
		items = append(items, got...)
	}
	if !readable {
		return apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("no cluster namespace is readable"))
	}
	return meta.SetList(list, items)
}

// Collect reads the fleet's objects through c. A kind the caller may not
// list is recorded in Snapshot.Unreadable rather than failing the dump.
func Collect(ctx context.Context, c client.Client, o Options) (*Archive, error) {
	a := &Archive{Filter: o.Filter}
	s := &a.Snapshot
	s.Taken = o.Now
	if s.Taken.IsZero() {
		s.Taken = time.Now()
	}
	s.Taken = s.Taken.UTC().Truncate(time.Second)
	lists := []struct {
		kind string
		list client.ObjectList
		opts []client.ListOption
	}{
		{diagnose.KindCluster, &fleet.ClusterList{}, nil},
		{diagnose.KindClusterGroup, &fleet.ClusterGroupList{}, nil},
		{diagnose.KindBundle, &fleet.BundleList{}, nil},
		{diagnose.KindBundleDeployment, &fleet.BundleDeploymentList{}, nil},
		{diagnose.KindGitRepo, &fleet.GitRepoList{}, nil},
		{diagnose.KindHelmOp, &fleet.HelmOpList{}, nil},
		{diagnose.KindToken, &fleet.ClusterRegistrationTokenList{}, nil},
		{diagnose.KindRegistration, &fleet.ClusterRegistrationList{}, nil},
		{diagnose.KindLease, &coordinationv1.LeaseList{}, []client.ListOption{client.MatchingFieldsSelector{
			Selector: fields.OneTermEqualSelector("metadata.name", fleet.AgentLeaseName)}}},
		{diagnose.KindCAPICluster, &clusterv1.ClusterList{}, nil},
	}
	for _, l := range lists {
		opts := l.opts
		inClusterNamespaces := l.kind == diagnose.KindBundleDeployment || l.kind == diagnose.KindLease
		if o.Namespace != "" && !inClusterNamespaces {
			opts = append(opts, client.InNamespace(o.Namespace))
		}
		err := c.List(ctx, l.list, opts...)
		if apierrors.IsForbidden(err) && inClusterNamespaces {
			// Whoever may not list them everywhere may still read those of
			// the clusters it can see, namespace by namespace.
			err = listPerClusterNamespace(ctx, c, s.Clusters, l.list, opts)
		}
		switch {
		case l.kind == diagnose.KindCAPICluster && (meta.IsNoMatchError(err) || runtime.IsNotRegisteredError(err)):
			// Cluster API is not installed (or c's scheme does not know it).
			s.Absent = append(s.Absent, l.kind)
			continue
		case apierrors.IsForbidden(err) || meta.IsNoMatchError(err):
			s.Unreadable = append(s.Unreadable, l.kind)
			continue
		case err != nil:
			return nil, fmt.Errorf("listing %s: %w", l.kind, err)
		}
		switch t := l.list.(type) {
		case *fleet.ClusterList:
			s.Clusters = t.Items
		case *fleet.ClusterGroupList:
			s.ClusterGroups = t.Items
		case *fleet.BundleList:
			s.Bundles = t.Items
		case *fleet.BundleDeploymentList:
			s.BundleDeployments = t.Items
		case *fleet.GitRepoList:
			s.GitRepos = t.Items
		case *fleet.HelmOpList:
			s.HelmOps = t.Items
		case *fleet.ClusterRegistrationTokenList:
			s.Tokens = t.Items
		case *fleet.ClusterRegistrationList:
			s.Registrations = t.Items
		case *coordinationv1.LeaseList:
			s.Leases = t.Items
		case *clusterv1.ClusterList:
			s.CAPIClusters = t.Items
		}
	}
	apply(s, o.Filter)
	Scrub(s)
	events := &corev1.EventList{}
	switch err := c.List(ctx, events); {
	case apierrors.IsForbidden(err):
		s.Unreadable = append(s.Unreadable, "events")
	case err != nil:
		return nil, fmt.Errorf("listing events: %w", err)
	default:
		a.Events = eventsAbout(s, events.Items)
	}
	if o.MetricsURL != "" {
		m, err := fetch(ctx, o.MetricsURL)
		a.Metrics = m
		if err != nil {
			a.MetricsError = err.Error()
		}
	}
	return a, nil
}
