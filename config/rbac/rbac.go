// Package rbac embeds the manager's ClusterRole that controller-gen generates
// from the +kubebuilder:rbac markers beside each reconciler (`make
// generate`), so that `fleet install controller`, config/default and the
// tests that run the manager with only these rights share one source.
package rbac

import (
	_ "embed"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

//go:embed role.yaml
var role []byte

// ManagerRules are the rules of the generated fleet-manager ClusterRole.
func ManagerRules() ([]rbacv1.PolicyRule, error) {
	r := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(role, r); err != nil {
		return nil, fmt.Errorf("decoding the generated config/rbac/role.yaml: %w", err)
	}
	return r.Rules, nil
}
