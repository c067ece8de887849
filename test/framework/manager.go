package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/enqueue"
	"github.com/gitfleet/fleet/internal/install"
)

// StartManager runs the manager's controllers in this process against cfg
// and returns a function that stops them. The manager runs with exactly the
// rights `fleet install controller` gives it: its ServiceAccount, ClusterRole
// (generated from the reconcilers' +kubebuilder:rbac markers) and binding are
// applied with cfg's admin rights, and the manager impersonates that
// ServiceAccount, so a reconciler that needs a right its markers do not
// grant fails here as it would in a real cluster.
func StartManager(ctx context.Context, cfg *rest.Config, o controllers.Options) (func(), error) {
	stop, _, err := startManager(ctx, cfg, o, "0")
	return stop, err
}

// StartManagerWithCache is StartManager that also returns the manager's
// cache, for specs that check what the manager keeps in memory.
func StartManagerWithCache(ctx context.Context, cfg *rest.Config, o controllers.Options) (func(), cache.Cache, error) {
	return startManager(ctx, cfg, o, "0")
}

// StartManagerServingMetrics is StartManager with the manager's metrics
// endpoint served on a free loopback port, whose URL it returns.
func StartManagerServingMetrics(ctx context.Context, cfg *rest.Config, o controllers.Options) (stop func(), metricsURL string, err error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, "", err
	}
	stop, _, err = startManager(ctx, cfg, o, addr)
	return stop, "http://" + addr + "/metrics", err
}

func startManager(ctx context.Context, cfg *rest.Config, o controllers.Options, metricsAddr string) (func(), cache.Cache, error) {
	o.Egress = AllowLoopback(o.Egress)
	managerCfg, err := ManagerConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	// A suite may run a second manager (another shard) in this process,
	// with controllers of the same names.
	ctrlOpts := enqueue.ControllerDefaults()
	ctrlOpts.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(managerCfg, ctrl.Options{
		Scheme:     controllers.Scheme(),
		Controller: ctrlOpts,
		Cache:      controllers.CacheOptions(o),
		Metrics:    metricsserver.Options{BindAddress: metricsAddr},
	})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	if err := controllers.Setup(ctx, mgr, o); err != nil {
		cancel()
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, nil, fmt.Errorf("manager cache did not sync: %v", <-done)
	}
	return func() {
		cancel()
		<-done //nolint:errcheck // only waits for the manager to stop: the spec is over, and Start's error (nil when cancelled) concerns no test
	}, mgr.GetCache(), nil
}

// ManagerConfig installs the manager's ServiceAccount and RBAC as `fleet
// install controller` prints them, with admin's rights, and returns a copy of
// admin that impersonates that ServiceAccount.
func ManagerConfig(ctx context.Context, admin *rest.Config) (*rest.Config, error) {
	c, err := client.New(admin, client.Options{Scheme: controllers.Scheme()})
	if err != nil {
		return nil, err
	}
	objs, err := install.ControllerObjects(install.ControllerOptions{})
	if err != nil {
		return nil, err
	}
	var user, roleNS string
	var rules, nsRules []rbacv1.PolicyRule
	for _, obj := range objs {
		if role, ok := obj.(*rbacv1.ClusterRole); ok {
			rules = role.Rules
		}
		if role, ok := obj.(*rbacv1.Role); ok {
			nsRules, roleNS = role.Rules, role.Namespace
		}
		switch obj.GetObjectKind().GroupVersionKind().Kind {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		default:
			continue
		}
		if obj.GetObjectKind().GroupVersionKind().Kind == "ServiceAccount" && obj.GetName() == install.ManagerName {
			user = fmt.Sprintf("system:serviceaccount:%s:%s", obj.GetNamespace(), obj.GetName())
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("converting the manager's %s %s for server-side apply: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}), client.FieldOwner("fleet-e2e"), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("installing the manager's %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	groups := []string{"system:serviceaccounts", "system:authenticated"}
	if err := waitAuthorized(ctx, c, user, groups, "", rules); err != nil {
		return nil, err
	}
	if err := waitAuthorized(ctx, c, user, groups, roleNS, nsRules); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg, nil
}

// waitAuthorized waits until the API server's authorizer grants user every
// verb of rules: it learns of new RBAC objects from its own informers, a
// moment after they were written, and a manager started in that moment is
// refused.
func waitAuthorized(ctx context.Context, c client.Client, user string, groups []string, namespace string, rules []rbacv1.PolicyRule) error {
	var pending []authorizationv1.ResourceAttributes
	for _, r := range rules {
		// A rule for some names only is granted for those names only.
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, v := range r.Verbs {
					for _, name := range names {
						pending = append(pending, authorizationv1.ResourceAttributes{Namespace: namespace, Group: g, Resource: resource, Subresource: sub, Verb: v, Name: name})
					}
				}
			}
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for len(pending) > 0 {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: groups, ResourceAttributes: &pending[0]}}
			if err := c.Create(ctx, review); err != nil {
				return false, err
			}
			if !review.Status.Allowed {
				return false, nil
			}
			pending = pending[1:]
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the API server to grant the manager's ServiceAccount its ClusterRole (%d rights still refused, first %+v): %w", len(pending), pending[0], err)
	}
	return nil
}
