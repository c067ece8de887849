package main

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/deployer"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/scheme"
	"github.com/gitfleet/fleet/internal/target"
)

// clusterSource says where `fleet target` and `fleet test` find the clusters
// a bundle may target: a file of objects (offline), or the manager's
// cluster through a kubeconfig.
type clusterSource struct {
	file       string
	kubeconfig string
}

// load reads the Clusters, ClusterGroups, BundleNamespaceMappings and
// namespaces targeting needs.
func (s clusterSource) load(ctx context.Context) (target.Inputs, error) {
	if s.file != "" {
		return readInputsFile(s.file)
	}
	return listInputs(ctx, s.kubeconfig)
}

// readInputsFile reads a YAML stream of Cluster, ClusterGroup,
// BundleNamespaceMapping and Namespace objects (Lists of them too), as
// `kubectl get clusters,clustergroups -A -o yaml` writes them.
func readInputsFile(path string) (target.Inputs, error) {
	in := target.Inputs{Namespaces: map[string]map[string]string{}}
	data, err := os.ReadFile(path) //nolint:gosec // G304: the path the user passed with --clusters
	if err != nil {
		return in, err
	}
	docs, err := deployer.DecodeDocuments(data)
	if err != nil {
		return in, fmt.Errorf("%s: %w", path, err)
	}
	var objs []*unstructured.Unstructured
	for _, d := range docs {
		u := &unstructured.Unstructured{Object: d}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return in, fmt.Errorf("%s: %w", path, err)
			}
			for i := range list.Items {
				objs = append(objs, &list.Items[i])
			}
			continue
		}
		objs = append(objs, u)
	}
	for i, u := range objs {
		gvk := u.GroupVersionKind()
		where := fmt.Sprintf("%s: object %d (%s %s)", path, i+1, gvk.Kind, u.GetName())
		var into runtime.Object
		switch {
		case gvk.Group == fleet.GroupVersion.Group && gvk.Kind == "Cluster":
			c := &fleet.Cluster{}
			in.Clusters, into = append(in.Clusters, c), c
		case gvk.Group == fleet.GroupVersion.Group && gvk.Kind == "ClusterGroup":
			g := &fleet.ClusterGroup{}
			in.Groups, into = append(in.Groups, g), g
		case gvk.Group == fleet.GroupVersion.Group && gvk.Kind == "BundleNamespaceMapping":
			m := &fleet.BundleNamespaceMapping{}
			in.Mappings, into = append(in.Mappings, m), m
		case gvk.Group == "" && gvk.Kind == "Namespace":
			in.Namespaces[u.GetName()] = u.GetLabels()
			continue
		default:
			return in, fmt.Errorf("%s: only fleet.cattle.io Clusters, ClusterGroups, BundleNamespaceMappings and Namespaces are read here", where)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
			return in, fmt.Errorf("%s: %w", where, err)
		}
		if u.GetNamespace() == "" {
			return in, fmt.Errorf("%s: has no namespace: give metadata.namespace (the workspace, such as %s)", where, fleet.DefaultWorkspace)
		}
	}
	// The workspaces of the objects exist, even when the file lists no
	// Namespace objects.
	for _, c := range in.Clusters {
		if _, ok := in.Namespaces[c.Namespace]; !ok {
			in.Namespaces[c.Namespace] = nil
		}
	}
	return in, nil
}

// listInputs lists what targeting reads from the manager's cluster.
// Namespaces are listed only when there are BundleNamespaceMappings.
func listInputs(ctx context.Context, kubeconfigPath string) (target.Inputs, error) {
	in := target.Inputs{}
	cfg, err := kubeconfig.Load(kubeconfigPath)
	if err != nil {
		return in, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return in, err
	}
	clusters, groups, mappings := &fleet.ClusterList{}, &fleet.ClusterGroupList{}, &fleet.BundleNamespaceMappingList{}
	for _, l := range []client.ObjectList{clusters, groups, mappings} {
		err := c.List(ctx, l)
		if meta.IsNoMatchError(err) || discovery.IsGroupDiscoveryFailedError(err) {
			return in, fmt.Errorf("the cluster of the kubeconfig does not serve fleet.cattle.io: point -k at the manager's cluster, or give --clusters FILE: %w", err)
		}
		if err != nil {
			return in, err
		}
	}
	for i := range clusters.Items {
		in.Clusters = append(in.Clusters, &clusters.Items[i])
	}
	for i := range groups.Items {
		in.Groups = append(in.Groups, &groups.Items[i])
	}
	for i := range mappings.Items {
		in.Mappings = append(in.Mappings, &mappings.Items[i])
	}
	if len(in.Mappings) > 0 {
		nss := &corev1.NamespaceList{}
		if err := c.List(ctx, nss); err != nil {
			return in, fmt.Errorf("listing namespaces for the BundleNamespaceMappings: %w", err)
		}
		in.Namespaces = map[string]map[string]string{}
		for _, ns := range nss.Items {
			in.Namespaces[ns.Name] = ns.Labels
		}
	}
	return in, nil
}
