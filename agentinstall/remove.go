package agentinstall

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/agentmanifest"
)

// protectedNamespaces are never deleted with an agent installed into them.
var protectedNamespaces = map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true}

// StopAgent deletes the agent Deployment in namespace and reports whether
// the agent has stopped: no pod of it is left (a pod being deleted still
// runs until its kubelet says it ended). Call it until it says so before
// anything the agent would act on changes.
func StopAgent(ctx context.Context, c client.Client, namespace string) (bool, error) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fleet.AgentName}}
	if err := client.IgnoreNotFound(c.Delete(ctx, dep, client.PropagationPolicy(metav1.DeletePropagationBackground))); err != nil {
		return false, fmt.Errorf("deleting the agent Deployment %s/%s: %w", namespace, fleet.AgentName, err)
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{"app": fleet.AgentName}); err != nil {
		return false, fmt.Errorf("listing the agent's pods in %s: %w", namespace, err)
	}
	return len(pods.Items) == 0, nil
}

// Remove deletes what Objects installed into namespace, the Deployment
// first (see StopAgent): the ClusterRoleBinding, ServiceAccount, ConfigMap
// and bootstrap Secret, and the namespace itself (with what the agent kept
// there, its credential and lease) when the installer labelled it, it is
// none of Kubernetes' own and it holds no Helm release: releases deployed
// into the agent's namespace stay with it.
func Remove(ctx context.Context, c client.Client, namespace string) error {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: namespace, Name: name} }
	for _, o := range []client.Object{
		&appsv1.Deployment{ObjectMeta: meta(fleet.AgentName)},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: fleet.AgentName + "-" + namespace}},
		&corev1.ServiceAccount{ObjectMeta: meta(fleet.AgentName)},
		&corev1.ConfigMap{ObjectMeta: meta(fleet.AgentName)},
		&corev1.Secret{ObjectMeta: meta(fleet.AgentBootstrapSecretName)},
	} {
		if err := client.IgnoreNotFound(c.Delete(ctx, o)); err != nil {
			return fmt.Errorf("deleting %T %s: %w", o, client.ObjectKeyFromObject(o), err)
		}
	}
	if err := RemoveScheduling(ctx, c, namespace, nil); err != nil {
		return err
	}
	if protectedNamespaces[namespace] {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ns.Labels[ManagedByLabel] != "fleet" || !ns.DeletionTimestamp.IsZero() {
		return nil
	}
	releases := &corev1.SecretList{}
	if err := c.List(ctx, releases, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm"}, client.Limit(1)); err != nil {
		return fmt.Errorf("looking for Helm releases in %s: %w", namespace, err)
	}
	if len(releases.Items) > 0 {
		return nil
	}
	if err := client.IgnoreNotFound(c.Delete(ctx, ns, client.Preconditions{UID: &ns.UID})); err != nil {
		return fmt.Errorf("deleting the agent namespace %s: %w", namespace, err)
	}
	return nil
}

// Releases counts the Helm releases the agent of clusterNamespace deployed
// downstream that are still there (their release records).
func Releases(ctx context.Context, c client.Client, clusterNamespace string) (int, error) {
	list := &corev1.SecretList{}
	if err := c.List(ctx, list, client.MatchingLabels{"owner": "helm", fleet.ManagedLabel: "true", fleet.ClusterNamespaceLabel: clusterNamespace}); err != nil {
		return 0, fmt.Errorf("listing the agent's Helm releases: %w", err)
	}
	return len(list.Items), nil
}

// RemoveScheduling deletes the agent's PriorityClass and PodDisruptionBudget
// in namespace that keep (a Cluster's spec.agentSchedulingCustomization)
// no longer asks for; nil keep deletes both. Only the agent's go (label
// app=fleet-agent, which the install and the agent Bundle both set): a
// PriorityClass of that name someone else made stays.
func RemoveScheduling(ctx context.Context, c client.Client, namespace string, keep *fleet.AgentSchedulingCustomization) error {
	var objs []client.Object
	if keep == nil || keep.PriorityClass == nil {
		objs = append(objs, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: agentmanifest.PriorityClassName}})
	}
	if keep == nil || keep.PodDisruptionBudget == nil {
		objs = append(objs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: agentmanifest.PodDisruptionBudgetName}})
	}
	for _, o := range objs {
		key := client.ObjectKeyFromObject(o)
		if err := c.Get(ctx, key, o); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading %T %s: %w", o, key, err)
		}
		if o.GetLabels()["app"] != fleet.AgentName || !o.GetDeletionTimestamp().IsZero() {
			continue
		}
		uid := o.GetUID()
		if err := client.IgnoreNotFound(c.Delete(ctx, o, client.Preconditions{UID: &uid})); err != nil {
			return fmt.Errorf("deleting %T %s: %w", o, key, err)
		}
	}
	return nil
}
