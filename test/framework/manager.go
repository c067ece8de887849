package framework

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitfleet/fleet/controllers"
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
	managerCfg, err := ManagerConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(managerCfg, ctrl.Options{
		Scheme:  controllers.Scheme(),
		Cache:   controllers.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	if err := controllers.Setup(ctx, mgr, o); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("manager cache did not sync: %v", <-done)
	}
	return func() { cancel(); <-done }, nil
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
	var user string
	for _, obj := range objs {
		switch obj.GetObjectKind().GroupVersionKind().Kind {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding":
		default:
			continue
		}
		if obj.GetObjectKind().GroupVersionKind().Kind == "ServiceAccount" {
			user = fmt.Sprintf("system:serviceaccount:%s:%s", obj.GetNamespace(), obj.GetName())
		}
		if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner("fleet-e2e"), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("installing the manager's %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	return cfg, nil
}
