package target

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Criteria is one set of Fleet's cluster criteria (a cluster name, a
// cluster selector, a group name, a group selector: all that are set must
// match), for kinds other than Bundles that target clusters the same way
// (a Schedule's targets).
type Criteria struct{ c criteria }

// CompileCriteria parses the selectors; an entry that sets nothing matches
// no cluster, as in Fleet.
func CompileCriteria(clusterName, clusterGroup string, clusterSelector, clusterGroupSelector *metav1.LabelSelector) (*Criteria, error) {
	c, err := compileCriteria(clusterName, clusterGroup, clusterSelector, clusterGroupSelector)
	if err != nil {
		return nil, err
	}
	return &Criteria{c: c}, nil
}

// Matches tells whether the criteria select the cluster.
func (c *Criteria) Matches(info *ClusterInfo) bool { return c.c.matches(info) }
