package clusterregistration

import (
	"context"
	"errors"
	"fmt"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/ensure"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Names of the shared RBAC objects.
const (
	// AgentRole is the ClusterRole that agents are bound to, each in its own
	// cluster namespace only (by a RoleBinding there).
	AgentRole = "fleet-agent"
	// ContentReaderRole is the ClusterRole that lets agents get Contents.
	ContentReaderRole = "fleet-content-reader"
	// ContentReaderBinding binds ContentReaderRole to the group of every
	// ServiceAccount of the agents' namespace: one binding for all agents,
	// which the API server's authorizer weighs on each request, rather than
	// one per agent.
	ContentReaderBinding = "fleet-agents-content-reader"
)

// agentGroup is the group of every ServiceAccount of the agents' namespace.
func agentGroup(agentNamespace string) string {
	return "system:serviceaccounts:" + agentNamespace
}

// SharedRoles are the ClusterRoles every agent is bound to. They are the
// same for all agents, so they are made once at start rather than by each
// grant:
//   - fleet-agent: what an agent may do in its cluster namespace. Bound by a
//     RoleBinding in that namespace, it grants nothing anywhere else. Besides
//     its BundleDeployments, Secrets and ConfigMaps, the agent keeps its
//     check-in Lease there (fleet.AgentLeaseName, the only Lease it may read
//     or renew; RBAC lets it create Leases there, as create cannot be
//     limited to a name, and the admission policy fleet-agent-leases
//     (internal/install) refuses any other name);
//   - fleet-content-reader: get Contents (by name; no list or watch).
func SharedRoles() []*rbacv1.ClusterRole {
	labels := map[string]string{fleet.ManagedLabel: "true"}
	return []*rbacv1.ClusterRole{{
		ObjectMeta: metav1.ObjectMeta{Name: AgentRole, Labels: labels},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{fleet.GroupVersion.Group}, Resources: []string{"bundledeployments"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{fleet.GroupVersion.Group}, Resources: []string{"bundledeployments/status"}, Verbs: []string{"update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get"}},
			{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"get", "update", "patch"},
				ResourceNames: []string{fleet.AgentLeaseName}},
		},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: ContentReaderRole, Labels: labels},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{fleet.GroupVersion.Group}, Resources: []string{"contents"}, Verbs: []string{"get"}}},
	}}
}

// SharedBindings are the bindings made once for every agent: Contents for
// the group of the agents' namespace.
func SharedBindings(agentNamespace string) []*rbacv1.ClusterRoleBinding {
	return []*rbacv1.ClusterRoleBinding{{
		ObjectMeta: metav1.ObjectMeta{Name: ContentReaderBinding, Labels: map[string]string{fleet.ManagedLabel: "true"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ContentReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: agentGroup(agentNamespace)}},
	}}
}

// EnsureSharedRoles creates or corrects the shared ClusterRoles, the agents'
// namespace agentNamespace and the bindings shared by all agents. Replicas
// starting together race to create them: the loser reads them again and
// corrects them. An agents' namespace that exists and was not made by fleet
// is refused: every ServiceAccount in it may read Contents.
func EnsureSharedRoles(ctx context.Context, c client.Client, agentNamespace string) error {
	if err := ensureAgentNamespace(ctx, c, agentNamespace); err != nil {
		return err
	}
	raced := func(err error) bool { return apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) }
	var objs []client.Object
	for _, role := range SharedRoles() {
		objs = append(objs, role)
	}
	for _, b := range SharedBindings(agentNamespace) {
		objs = append(objs, b)
	}
	for _, obj := range objs {
		if err := retry.OnError(retry.DefaultRetry, raced, func() error {
			return ensureObject(ctx, c, map[string]string{fleet.ManagedLabel: "true"}, obj)
		}); err != nil {
			return err
		}
	}
	return nil
}

// ensureAgentNamespace creates the agents' namespace, or checks that fleet
// made the one there.
func ensureAgentNamespace(ctx context.Context, c client.Client, name string) error {
	if name == "" {
		return errors.New("no namespace for the agents' ServiceAccounts was given")
	}
	ns := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{fleet.ManagedLabel: "true"}}}
		if err = c.Create(ctx, ns); apierrors.IsAlreadyExists(err) {
			err = c.Get(ctx, client.ObjectKey{Name: name}, ns)
		}
	}
	if err != nil {
		return fmt.Errorf("ensuring the agents' namespace %s: %w", name, err)
	}
	if !ensure.Carries(ns, managed) {
		return fmt.Errorf("namespace %s, where fleet keeps the agents' ServiceAccounts (every one of which may read Contents), exists and was not made by fleet (no %s=true label): delete it, or label it if it is the one fleet made", name, fleet.ManagedLabel)
	}
	return nil
}

// StatusRoleName is the Role that let an agent patch its own Cluster's
// status, before agents checked in with a Lease: revoking a registration
// of that time deletes it.
func StatusRoleName(cluster string) string {
	return names.Limit("fleet-agent-"+cluster+"-status", names.MaxNameLength)
}

// managed is what everything the manager writes carries.
var managed = map[string]string{fleet.ManagedLabel: "true"}

// notOwned refuses to touch an object the manager did not make.
func notOwned(obj client.Object) error {
	return outcome.Stallf(fleet.ReasonNotOwned,
		"%T %s/%s exists and was not made by fleet (no %s=true label): fleet neither replaces nor deletes it; remove or rename it if the name is meant for fleet",
		obj, obj.GetNamespace(), obj.GetName(), fleet.ManagedLabel)
}

// replaceBindingOfOtherRole deletes a binding the manager made that exists
// with another roleRef than wanted (one made by an earlier version, bound to
// a Role since replaced by a shared ClusterRole): roleRef cannot be changed,
// so the binding is made again. have is the binding as it is.
func replaceBindingOfOtherRole(ctx context.Context, c client.Client, want, have client.Object) error {
	var ref, got rbacv1.RoleRef
	switch w := want.(type) {
	case *rbacv1.RoleBinding:
		ref, got = w.RoleRef, have.(*rbacv1.RoleBinding).RoleRef
	case *rbacv1.ClusterRoleBinding:
		ref, got = w.RoleRef, have.(*rbacv1.ClusterRoleBinding).RoleRef
	default:
		return nil
	}
	if got == ref {
		return nil
	}
	uid := have.GetUID()
	if err := c.Delete(ctx, have, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("replacing %T %s/%s bound to %s %s: %w", want, want.GetNamespace(), want.GetName(), got.Kind, got.Name, err)
	}
	return nil
}

// deleteOwned deletes those of objs (named, not read) that exist and carry
// labels, each by its UID; others are left alone.
func deleteOwned(ctx context.Context, c client.Client, labels map[string]string, objs ...client.Object) error {
	for _, obj := range objs {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if !ensure.Carries(obj, labels) {
			continue
		}
		uid := obj.GetUID()
		if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// concurrently runs independent steps at once and joins their errors.
func concurrently(steps ...func() error) error {
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, step := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = step()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ensureObject creates want, or brings the one of its name in line with it
// when the manager made that one (it carries fleet.ManagedLabel); it never
// rewrites or replaces an object made by anyone else.
func ensureObject(ctx context.Context, c client.Client, labels map[string]string, want client.Object) error {
	have := want.DeepCopyObject().(client.Object)
	err := c.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case !ensure.Carries(have, managed):
		return notOwned(want)
	default:
		if err := replaceBindingOfOtherRole(ctx, c, want, have); err != nil {
			return err
		}
	}
	obj := want.DeepCopyObject().(client.Object)
	_, err = controllerutil.CreateOrPatch(ctx, c, obj, func() error {
		if obj.GetResourceVersion() != "" && !ensure.Carries(obj, managed) {
			return notOwned(want) // made meanwhile by someone else
		}
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		obj.SetLabels(l)
		switch o := obj.(type) {
		case *rbacv1.Role:
			o.Rules = want.(*rbacv1.Role).Rules
		case *rbacv1.ClusterRole:
			o.Rules = want.(*rbacv1.ClusterRole).Rules
		case *rbacv1.RoleBinding:
			o.RoleRef, o.Subjects = want.(*rbacv1.RoleBinding).RoleRef, want.(*rbacv1.RoleBinding).Subjects
		case *rbacv1.ClusterRoleBinding:
			o.RoleRef, o.Subjects = want.(*rbacv1.ClusterRoleBinding).RoleRef, want.(*rbacv1.ClusterRoleBinding).Subjects
		}
		return nil
	})
	if err != nil {
		if outcome.IsStalling(err) {
			return err
		}
		return fmt.Errorf("ensuring %T %s/%s: %w", want, want.GetNamespace(), want.GetName(), err)
	}
	return nil
}
