package framework

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/satoken"
)

// Footholds: clients holding exactly the rights an attacker would, built
// from real credentials (a ServiceAccount token minted by the API server,
// a registration token as the manager issues it), never the admin's rights
// or impersonation. Security specs attack with these and assert refusal.

// BearerConfig is a REST config for the API server of admin that
// authenticates with token alone (no client certificate).
func BearerConfig(admin *rest.Config, token string) *rest.Config {
	return &rest.Config{
		Host:            admin.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData, ServerName: admin.ServerName},
		BearerToken:     token,
		QPS:             50,
		Burst:           100,
	}
}

// ServiceAccountClient creates the ServiceAccount namespace/name when it is
// missing, mints a token for it and returns a client that uses that token.
func ServiceAccountClient(ctx context.Context, admin client.Client, cfg *rest.Config, scheme *runtime.Scheme, namespace, name string) (client.Client, *rest.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := admin.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("creating service account %s/%s: %w", namespace, name, err)
	}
	token, err := satoken.Mint(ctx, admin, namespace, name, time.Hour)
	if err != nil {
		return nil, nil, err
	}
	c := BearerConfig(cfg, token)
	cl, err := client.New(c, client.Options{Scheme: scheme})
	return cl, c, err
}

// TenantRules are what a tenant of one namespace may do there: write
// GitRepos, Clusters, ClusterGroups, their Secrets and ConfigMaps, and read
// what fleet makes from them.
func TenantRules() []rbacv1.PolicyRule {
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{fleet.GroupVersion.Group}, Resources: []string{"gitrepos", "clusters", "clustergroups", "helmops"}, Verbs: all},
		{APIGroups: []string{fleet.GroupVersion.Group}, Resources: []string{"bundles", "bundledeployments", "gitrepos/status", "clusters/status"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: all},
	}
}

// TenantClient gives a tenant of namespace ns: a ServiceAccount "tenant" in
// ns bound by a Role there to TenantRules, and a client with its token. The
// namespace is created when missing.
func TenantClient(ctx context.Context, admin client.Client, cfg *rest.Config, scheme *runtime.Scheme, ns string) (client.Client, error) {
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating tenant namespace %s: %w", ns, err)
	}
	meta := metav1.ObjectMeta{Namespace: ns, Name: "tenant"}
	for _, obj := range []client.Object{
		&rbacv1.Role{ObjectMeta: meta, Rules: TenantRules()},
		&rbacv1.RoleBinding{ObjectMeta: meta,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}}},
	} {
		if err := admin.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("granting the tenant of %s its rights: %w", ns, err)
		}
	}
	c, _, err := ServiceAccountClient(ctx, admin, cfg, scheme, ns, "tenant")
	return c, err
}
