// Package envtest runs a controller package's integration tests against one
// real control plane (kube-apiserver and etcd, see test/controlplane) with
// the reconcilers under test running in a controller-runtime manager, and
// offers the create-and-wait helpers that keep those tests from racing the
// manager's cache.
//
// A controller package uses it from its suite_test.go:
//
//	var env *envtest.Environment
//
//	func TestMain(m *testing.M) {
//		os.Exit(envtest.Run(context.Background(), envtest.RunInput{
//			M:    m,
//			Name: "bundle",
//			SetupReconcilers: func(ctx context.Context, mgr ctrl.Manager) error {
//				return (&bundle.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr)
//			},
//			SetupEnv: func(e *envtest.Environment) { env = e },
//		}))
//	}
//
// Specs that need several clusters, agents or the built binaries belong in
// test/e2e instead.
package envtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/enqueue"
	"github.com/gitfleet/fleet/test/controlplane"
)

// RunInput says what a package's integration tests need.
type RunInput struct {
	// M runs the package's tests.
	M *testing.M
	// Name names the control plane (in its kubeconfig and in errors).
	Name string
	// CAPI also serves Cluster API's Cluster kind.
	CAPI bool
	// SetupReconcilers registers the reconcilers under test (and the
	// indexes they rely on) with the manager before it starts.
	SetupReconcilers func(ctx context.Context, mgr ctrl.Manager) error
	// SetupEnv receives the environment once the manager's cache has
	// synced, before the tests run.
	SetupEnv func(e *Environment)
	// Namespaces are created before the manager starts (for example the
	// workspace the reconcilers write into).
	Namespaces []string
}

// Environment is one running control plane and the manager of the
// reconcilers under test.
type Environment struct {
	// Client is a direct admin client (no cache): what tests write and read
	// back is what the API server holds.
	client.Client
	// Config is the admin REST config.
	Config *rest.Config
	// ControlPlane is the running kube-apiserver and etcd.
	ControlPlane *controlplane.ControlPlane
	// Manager runs the reconcilers under test. Its cache is what they see.
	Manager ctrl.Manager
}

// Run starts the control plane and the manager, runs the package's tests
// and stops everything; it returns the exit code for os.Exit.
func Run(ctx context.Context, in RunInput) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	env, stop, err := start(ctx, in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "envtest %s: %v\n", in.Name, err)
		return 1
	}
	defer stop()
	if in.SetupEnv != nil {
		in.SetupEnv(env)
	}
	return in.M.Run()
}

func start(ctx context.Context, in RunInput) (*Environment, func(), error) {
	cp, err := controlplane.Start(controlplane.Options{Name: in.Name, CAPI: in.CAPI})
	if err != nil {
		return nil, nil, err
	}
	env := &Environment{Config: cp.Config, ControlPlane: cp}
	fail := func(err error) (*Environment, func(), error) {
		_ = cp.Stop()
		return nil, nil, err
	}
	if env.Client, err = cp.Client(controllers.Scheme()); err != nil {
		return fail(err)
	}
	for _, ns := range in.Namespaces {
		if err := env.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fail(fmt.Errorf("creating namespace %s: %w", ns, err))
		}
	}
	env.Manager, err = ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:     controllers.Scheme(),
		Controller: enqueue.ControllerDefaults(),
		Cache:      controllers.CacheOptions(controllers.Options{}),
		Metrics:    metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return fail(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	if in.SetupReconcilers != nil {
		if err := in.SetupReconcilers(mctx, env.Manager); err != nil {
			cancel()
			return fail(fmt.Errorf("setting up the reconcilers: %w", err))
		}
	}
	done := make(chan error, 1)
	go func() { done <- env.Manager.Start(mctx) }()
	syncCtx, syncCancel := context.WithTimeout(mctx, time.Minute)
	defer syncCancel()
	if !env.Manager.GetCache().WaitForCacheSync(syncCtx) {
		cancel()
		return fail(fmt.Errorf("the manager's cache did not sync within a minute (the manager returned %v)", <-done))
	}
	return env, func() {
		cancel()
		<-done //nolint:errcheck // only waits for the manager to stop: the spec is over, and Start's error (nil when cancelled) concerns no test
		_ = cp.Stop()
	}, nil
}

// DefaultTimeout is how long the helpers wait for the manager by default.
const DefaultTimeout = 30 * time.Second

// WaitFor polls cond until it returns true, an error, or timeout passes (0:
// DefaultTimeout). The error names what was waited for, and the last error
// cond returned.
func WaitFor(ctx context.Context, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok && err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waited %s for %s: %w", timeout, what, last)
			}
			return fmt.Errorf("waited %s for %s", timeout, what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CreateAndWait creates obj and waits until the manager's cache holds it, so
// that the reconcilers under test see it before the test goes on.
func (e *Environment) CreateAndWait(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := e.Create(ctx, obj, opts...); err != nil {
		return err
	}
	return e.WaitInCache(ctx, obj)
}

// WaitInCache waits until the manager's cache holds obj.
func (e *Environment) WaitInCache(ctx context.Context, obj client.Object) error {
	key := client.ObjectKeyFromObject(obj)
	what := fmt.Sprintf("%T %s in the manager's cache", obj, key)
	return WaitFor(ctx, what, 0, func(ctx context.Context) (bool, error) {
		got := obj.DeepCopyObject().(client.Object)
		if err := e.Manager.GetCache().Get(ctx, key, got); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return true, nil
	})
}

// CreateNamespace creates a namespace with a generated name starting with
// prefix, for one test's objects.
func (e *Environment) CreateNamespace(ctx context.Context, prefix string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := e.CreateAndWait(ctx, ns); err != nil {
		return nil, fmt.Errorf("creating a namespace for the test: %w", err)
	}
	return ns, nil
}
