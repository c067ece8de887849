// Package recipients finds the age recipients of the clusters a label
// selector or a ClusterGroup picks: the agents' sealing keys (published on
// their check-in Leases) in age's "age1..." form, for `sops --encrypt --age`
// and `sops updatekeys` (`fleet secret recipients`).
package recipients

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/sealing"
	"github.com/gitfleet/fleet/internal/sops"
)

// Options say which clusters: those of Namespace (a workspace) that
// Selector matches, and those of the ClusterGroups named in Groups.
type Options struct {
	Namespace string
	Selector  string
	Groups    []string
}

// Recipient is one cluster's age recipient.
type Recipient struct {
	Cluster   string
	Recipient string
}

// Result lists the recipients, by cluster name, and the clusters picked
// whose agent has published no key (why, per cluster).
type Result struct {
	Recipients []Recipient
	Missing    []Missing
}

// Missing is a cluster picked without a usable key.
type Missing struct {
	Cluster string
	Why     string
}

// Strings are the distinct recipients, in cluster order.
func (r Result) Strings() []string {
	var out []string
	for _, rc := range r.Recipients {
		if !slices.Contains(out, rc.Recipient) {
			out = append(out, rc.Recipient)
		}
	}
	return out
}

// Pick returns the clusters of clusters that sel matches or that one of
// groups selects, each once, sorted by name. A group selects nothing
// without a selector, as the ClusterGroup controller counts it.
func Pick(clusters []fleet.Cluster, sel labels.Selector, groups []fleet.ClusterGroup) ([]fleet.Cluster, error) {
	var sels []labels.Selector
	if sel != nil {
		sels = append(sels, sel)
	}
	for _, g := range groups {
		if g.Spec.Selector == nil {
			continue
		}
		s, err := metav1.LabelSelectorAsSelector(g.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("ClusterGroup %s has an invalid selector: %w", g.Name, err)
		}
		sels = append(sels, s)
	}
	var out []fleet.Cluster
	for _, c := range clusters {
		if slices.ContainsFunc(sels, func(s labels.Selector) bool { return s.Matches(labels.Set(c.Labels)) }) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b fleet.Cluster) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Of is the age recipient of the agent whose check-in Lease is lease (nil:
// none yet).
func Of(lease *coordinationv1.Lease) (string, error) {
	if lease == nil {
		return "", errors.New("its agent has not checked in yet")
	}
	key, err := sealing.ParsePublicKey(lease.Annotations[fleet.SealingKeyAnnotation])
	if err != nil {
		return "", err
	}
	return sops.Recipient(key), nil
}

// List reads the Clusters, the ClusterGroups named and the check-in Leases
// through r and returns the recipients of the clusters o picks.
func List(ctx context.Context, r client.Reader, o Options) (Result, error) {
	var res Result
	if o.Selector == "" && len(o.Groups) == 0 {
		return res, errors.New("say which clusters: --selector (e.g. env=prod) and/or --group")
	}
	var sel labels.Selector
	if o.Selector != "" {
		s, err := labels.Parse(o.Selector)
		if err != nil {
			return res, fmt.Errorf("--selector %q: %w", o.Selector, err)
		}
		sel = s
	}
	var groups []fleet.ClusterGroup
	for _, name := range o.Groups {
		g := fleet.ClusterGroup{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: name}, &g); err != nil {
			return res, fmt.Errorf("reading ClusterGroup %s/%s: %w", o.Namespace, name, err)
		}
		groups = append(groups, g)
	}
	list := &fleet.ClusterList{}
	if err := r.List(ctx, list, client.InNamespace(o.Namespace)); err != nil {
		return res, fmt.Errorf("listing the Clusters of %s: %w", o.Namespace, err)
	}
	picked, err := Pick(list.Items, sel, groups)
	if err != nil {
		return res, err
	}
	for i := range picked {
		c := &picked[i]
		lease, err := checkin.Lease(ctx, r, c)
		if err != nil {
			return res, fmt.Errorf("reading the check-in Lease of Cluster %s/%s: %w", c.Namespace, c.Name, err)
		}
		rc, err := Of(lease)
		if err != nil {
			res.Missing = append(res.Missing, Missing{Cluster: c.Name, Why: err.Error()})
			continue
		}
		res.Recipients = append(res.Recipients, Recipient{Cluster: c.Name, Recipient: rc})
	}
	return res, nil
}
