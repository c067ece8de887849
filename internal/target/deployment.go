package target

import (
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
)

// Deployment is one targeted cluster: what the manager writes into that
// cluster's namespace for a bundle. The bundle controller and `fleet target`
// both build it with a Targeter and turn it into a BundleDeployment with
// BundleDeployment, so what the command prints is what the manager writes.
type Deployment struct {
	// Cluster is the targeted Cluster.
	Cluster *fleet.Cluster
	// Info is the Cluster as matching saw it, groups included.
	Info *ClusterInfo
	// Targets are the names of the bundle's targets whose options were
	// merged (Result.Targets); shared, read-only.
	Targets []string
	// Namespace is the Cluster's cluster namespace, where its
	// BundleDeployment lives.
	Namespace string
	// ID is the deploymentID: the Content's name and a hash of Options.
	ID string
	// Options are the effective options, Helm values templated for this
	// cluster. They may be shared with other clusters: read-only.
	Options *fleet.BundleDeploymentOptions
}

// Targeter matches the clusters of one pass over a bundle and works out
// their options and deploymentIDs. Clusters that match the same targets
// share one Result; unless the Helm values are templated per cluster they
// share options and deploymentID too, computed once. Not safe for
// concurrent use.
type Targeter struct {
	bundle      *CompiledBundle
	contentName string
	shared      map[*Result]sharedOptions
}

type sharedOptions struct {
	options *fleet.BundleDeploymentOptions
	id      string
}

// NewTargeter returns a Targeter for the compiled bundle whose resources are
// in the Content contentName (content.Encode names it).
func NewTargeter(cb *CompiledBundle, contentName string) *Targeter {
	return &Targeter{bundle: cb, contentName: contentName, shared: map[*Result]sharedOptions{}}
}

// Target decides whether cluster gets the bundle. groups are compiled
// ClusterGroups (any namespace; only those of the cluster's namespace that
// select it count). It returns false for a cluster that is not targeted or
// is being deleted (but for one that keeps its deployments while its agent
// is removed, fleet.KeepsDeployments), and an error when the cluster is targeted but its
// options cannot be worked out (a Helm values template that fails for it).
// The caller asks only about clusters of the namespaces AllowedNamespaces
// returns.
func (t *Targeter) Target(cluster *fleet.Cluster, groups []*CompiledGroup) (*Deployment, bool, error) {
	// A Cluster being deleted keeps its deployments only while its agent
	// is removed downstream first (its releases are to stay).
	if !cluster.DeletionTimestamp.IsZero() && !fleet.KeepsDeployments(cluster) {
		return nil, false, nil
	}
	info := ClusterInfoFor(cluster, groups)
	res, ok := t.bundle.Match(info)
	if !ok {
		return nil, false, nil
	}
	opts, id, err := t.optionsFor(res, cluster)
	if err != nil {
		return nil, true, fmt.Errorf("cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	return &Deployment{
		Cluster: cluster, Info: info, Targets: res.Targets, ID: id, Options: opts,
		Namespace: names.ClusterNamespaceFor(cluster.Namespace, cluster.Name, cluster.Status.Namespace),
	}, true, nil
}

// optionsFor returns a cluster's options and deploymentID, computed once per
// match result when nothing in them depends on the cluster.
func (t *Targeter) optionsFor(res *Result, cluster *fleet.Cluster) (*fleet.BundleDeploymentOptions, string, error) {
	if so, ok := t.shared[res]; ok {
		return so.options, so.id, nil
	}
	opts := res.Options.DeepCopy()
	templated := DependsOnCluster(opts.Helm)
	if templated {
		values, err := RenderHelmValues(opts.Helm, TemplateContextFor(cluster))
		if err != nil {
			return opts, "", err
		}
		opts.Helm.Values = nil
		if values != nil {
			opts.Helm.Values = &fleet.GenericMap{Data: values}
		}
	}
	id, err := DeploymentID(t.contentName, *opts)
	if err != nil {
		return opts, "", err
	}
	if !templated {
		t.shared[res] = sharedOptions{options: opts, id: id}
	}
	return opts, id, nil
}

// Inputs are the objects targeting reads besides the Bundle, for a caller
// without the controller's caches (`fleet target`, `fleet test`).
type Inputs struct {
	// Clusters are the candidate Clusters, of any namespace.
	Clusters []*fleet.Cluster
	// Groups are the ClusterGroups, of any namespace.
	Groups []*fleet.ClusterGroup
	// Mappings are the BundleNamespaceMappings, of any namespace.
	Mappings []*fleet.BundleNamespaceMapping
	// Namespaces are the labels of every namespace, by name; needed only
	// when a mapping applies to the bundle.
	Namespaces map[string]map[string]string
}

// Deployments targets b at the clusters of in, as the bundle controller
// does: the clusters of the bundle's namespace and of the namespaces mapped
// to it, matched with their groups. It returns the targeted clusters sorted
// by cluster namespace, and, apart, the clusters whose options failed. An
// invalid target, group selector or mapping is an error naming it.
func Deployments(b *fleet.Bundle, contentName string, in Inputs) ([]*Deployment, []error, error) {
	cb, err := Compile(b)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid targets: %w", err)
	}
	mappings := make([]*CompiledMapping, 0, len(in.Mappings))
	for _, m := range in.Mappings {
		cm, err := CompileMapping(m)
		if err != nil {
			return nil, nil, err
		}
		mappings = append(mappings, cm)
	}
	groups := make([]*CompiledGroup, 0, len(in.Groups))
	for _, g := range in.Groups {
		cg, err := CompileGroup(g)
		if err != nil {
			return nil, nil, err
		}
		groups = append(groups, cg)
	}
	allowed := AllowedNamespaces(mappings, b.Namespace, b.Labels, in.Namespaces)
	t := NewTargeter(cb, contentName)
	var out []*Deployment
	var errs []error
	for _, c := range in.Clusters {
		if !slices.Contains(allowed, c.Namespace) {
			continue
		}
		d, ok, err := t.Target(c, groups)
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok:
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out, errs, nil
}

// ownLabels are the labels every BundleDeployment carries; the bundle's own
// labels are added where they do not collide.
func ownLabels(b *fleet.Bundle, contentName string, d *Deployment) [6][2]string {
	return [...][2]string{
		{fleet.ManagedLabel, "true"},
		{fleet.BundleNameLabel, b.Name},
		{fleet.BundleNamespaceLabel, b.Namespace},
		{fleet.ClusterLabel, d.Cluster.Name},
		{fleet.ClusterNamespaceLabel, d.Cluster.Namespace},
		{fleet.ContentNameLabel, contentLabel(contentName)},
	}
}

// contentLabel is the ContentNameLabel value for contentName: the Content's
// name, or none for the contentsId of a bundle in OCI storage (too long for
// a label, and no Content to count references to).
func contentLabel(contentName string) string {
	if len(contentName) > validation.LabelValueMaxLength {
		return ""
	}
	return contentName
}

// BundleDeployment is the BundleDeployment the manager writes for d: named
// after the bundle, in the cluster namespace, deploying (and staging) d's
// options.
func BundleDeployment(b *fleet.Bundle, contentName string, d *Deployment) *fleet.BundleDeployment {
	own := ownLabels(b, contentName, d)
	labels := make(map[string]string, len(own)+len(b.Labels))
	for _, kv := range own {
		labels[kv[0]] = kv[1]
	}
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: d.Namespace, Labels: labels},
		Spec: fleet.BundleDeploymentSpec{
			StagedDeploymentID: d.ID,
			StagedOptions:      *d.Options,
			DeploymentID:       d.ID,
			Options:            *d.Options,
			Paused:             b.Spec.Paused || d.Cluster.Spec.Paused,
			OffSchedule:        OffSchedule(d.Cluster),
			DependsOn:          b.Spec.DependsOn,
			CorrectDrift:       d.Options.CorrectDrift,
			OCIContents:        b.Spec.ContentsID != "",
			HelmChartOptions:   HelmChartOptions(b),
		},
	}
	for k, v := range b.Labels {
		if _, taken := bd.Labels[k]; !taken {
			bd.Labels[k] = v
		}
	}
	return bd
}

// HelmChartOptions are the helmChartOptions of the BundleDeployments of b:
// for a HelmOp's bundle (helmOpOptions), its insecureSkipTLSVerify, and as
// secretName the copy of its Secret that the manager writes next to each
// BundleDeployment, under the BundleDeployment's name (which is b's); nil
// for any other bundle.
func HelmChartOptions(b *fleet.Bundle) *fleet.BundleHelmOptions {
	o := b.Spec.HelmOpOptions
	if o == nil {
		return nil
	}
	out := &fleet.BundleHelmOptions{InsecureSkipTLSverify: o.InsecureSkipTLSverify}
	if o.SecretName != "" {
		out.SecretName = b.Name
	}
	return out
}

// OffSchedule tells whether a cluster is outside its deployment windows: a
// Schedule holds it (status.scheduled) and none has its window open
// (status.activeSchedule), as Fleet reads them.
func OffSchedule(c *fleet.Cluster) bool {
	return c.Status.Scheduled && !c.Status.ActiveSchedule
}

// Unchanged tells whether existing already is what BundleDeployment would
// build for d, looked at in place: building every desired BundleDeployment
// on every pass was most of a pass's allocations at thousands of clusters.
// With deploy false, only the staged fields must agree: a rollout holds
// the deployed ones back.
func Unchanged(b *fleet.Bundle, contentName string, d *Deployment, existing *fleet.BundleDeployment, deploy bool) bool {
	spec := &existing.Spec
	if spec.StagedDeploymentID != d.ID || (deploy && spec.DeploymentID != d.ID) ||
		spec.Paused != (b.Spec.Paused || d.Cluster.Spec.Paused) ||
		spec.OffSchedule != OffSchedule(d.Cluster) ||
		!equality.Semantic.DeepEqual(&spec.StagedOptions, d.Options) ||
		(deploy && !equality.Semantic.DeepEqual(&spec.Options, d.Options)) ||
		!equality.Semantic.DeepEqual(spec.DependsOn, b.Spec.DependsOn) ||
		!equality.Semantic.DeepEqual(spec.CorrectDrift, d.Options.CorrectDrift) ||
		(deploy && spec.OCIContents != (b.Spec.ContentsID != "")) ||
		(deploy && !equality.Semantic.DeepEqual(spec.HelmChartOptions, HelmChartOptions(b))) {
		return false
	}
	own := ownLabels(b, contentName, d)
	want := len(own)
	for _, kv := range own {
		if v, ok := existing.Labels[kv[0]]; !ok || v != kv[1] {
			return false
		}
	}
	for k, v := range b.Labels {
		if slices.ContainsFunc(own[:], func(kv [2]string) bool { return kv[0] == k }) {
			continue
		}
		if have, ok := existing.Labels[k]; !ok || have != v {
			return false
		}
		want++
	}
	return len(existing.Labels) == want
}
