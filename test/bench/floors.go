package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/bundledeployment"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/registration"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/simagent"
)

// The floors: the writes a Ready BundleDeployment or a registration cannot
// do without, made directly by the bench's clients, with no manager, no
// agents and no watches. Their rates, over the ceilings measured on the same
// API server, are the most any layout that keeps those writes can reach
// there, whatever else it spends nothing on.

// CRFloor measures the least a Ready BundleDeployment costs the API server:
// count BundleDeployments, each created as the manager creates them and its
// Ready status then written as the agent writes it (bundledeployment.StatusOnly),
// by clients clients, with no manager, no agents and no watches. Its rate
// over the custom-resource ceiling is the most that any layout keeping one
// BundleDeployment and one status write by the agent per cluster and bundle
// can reach on this API server, whatever else it spends nothing on.
func CRFloor(ctx context.Context, cp *controlplane.ControlPlane, clients, count int, crCeiling float64) (Result, error) {
	c, err := newClient(cp.Config)
	if err != nil {
		return Result{}, err
	}
	ns := "bench-cr-floor"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return Result{}, err
	}
	id := "s-4aa1b66c7f4661cc9d4e95a29f4164d8e9528ebb61971567f4cd3b7-cb704:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
	prof := startAPIProfile(ctx, cp.Config)
	before := takeUsage(ctx, cp)
	start := time.Now()
	err = parallel(clients, count, func(i int) error {
		bd := &fleet.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bd-%d", i), Namespace: ns,
				Labels: map[string]string{
					fleet.BundleNameLabel: fmt.Sprintf("b-%03d", i%1000), fleet.BundleNamespaceLabel: fleet.DefaultWorkspace,
					fleet.ClusterLabel: fmt.Sprintf("c-%05d", i), fleet.ClusterNamespaceLabel: fleet.DefaultWorkspace,
					fleet.ContentNameLabel: id[:strings.IndexByte(id, ':')], fleet.ManagedLabel: "true"}},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: id, StagedDeploymentID: id},
		}
		if err := c.Create(ctx, bd, client.FieldOwner("fleet-manager")); err != nil {
			return err
		}
		return writeReady(ctx, c, bd)
	})
	return floorResult(ctx, cp, c, ns, "cr-floor",
		"BundleDeployments created and their Ready status written directly: the least a Ready BundleDeployment costs",
		count, start, before, prof, crCeiling, err)
}

// RegistrationFloor measures the least a registration costs the API server:
// for each of count clusters, the 8 writes of a registration made directly
// (the agent's ClusterRegistration with its public key; the grant's cluster
// namespace, ServiceAccount, Cluster, RoleBinding to the agent ClusterRole
// and token; the registration's status carrying a sealed credential; the
// Cluster's first status, applied), by clients clients, as many at once.
// None of the agents' reads, polls, TLS handshakes or own cluster's writes,
// and no manager: the time for count is the least in which count
// registrations can all be granted on this API server.
func RegistrationFloor(ctx context.Context, cp *controlplane.ControlPlane, clients, count int) (Result, error) {
	c, err := newClient(cp.Config)
	if err != nil {
		return Result{}, err
	}
	const ws, agents = "bench-floor-ws", "bench-floor-agents"
	for _, ns := range []string{ws, agents} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return Result{}, err
		}
	}
	key, err := registration.NewKey()
	if err != nil {
		return Result{}, err
	}
	publicKey := registration.EncodePublicKey(key)
	before := takeUsage(ctx, cp)
	start := time.Now()
	err = parallel(clients, count, func(i int) error {
		name := fmt.Sprintf("floor-%05d", i)
		labels := map[string]string{fleet.ManagedLabel: "true", fleet.ClusterLabel: name, fleet.ClusterNamespaceLabel: ws}
		reg := &fleet.ClusterRegistration{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws,
				Labels: map[string]string{fleet.RegistrationTokenLabel: "bench"}},
			Spec: fleet.ClusterRegistrationSpec{ClientID: name, ClientRandom: strings.Repeat("ab", 16), PublicKey: publicKey,
				ClusterLabels: map[string]string{"env": "dev"}},
		}
		if err := c.Create(ctx, reg); err != nil {
			return err
		}
		clusterNS := "cluster-" + ws + "-" + name
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS, Labels: labels}}); err != nil {
			return err
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: agents, Labels: labels}}
		if err := c.Create(ctx, sa); err != nil {
			return err
		}
		cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws, Labels: map[string]string{"env": "dev"}},
			Spec: fleet.ClusterSpec{ClientID: name}}
		if err := c.Create(ctx, cluster); err != nil {
			return err
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fleet-agent", Namespace: clusterNS, Labels: labels},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fleet-agent"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: agents, Name: name}}}
		if err := c.Create(ctx, rb); err != nil {
			return err
		}
		seconds := int64(30 * 24 * 3600)
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
		if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
			return err
		}
		sealed, err := registration.Seal(key.PublicKey(), ws, name, registration.SealedCredential{Token: tr.Status.Token,
			ClusterName: name, ClusterNamespace: clusterNS, Namespace: ws})
		if err != nil {
			return err
		}
		base := reg.DeepCopy()
		reg.Status.ClusterName, reg.Status.Granted, reg.Status.SealedCredential = name, true, sealed
		reg.Status.Conditions = []metav1.Condition{{Type: fleet.ConditionAccepted, Status: metav1.ConditionTrue,
			Reason: "Granted", Message: "granted", LastTransitionTime: metav1.Now()}}
		if err := c.Status().Patch(ctx, reg, client.MergeFrom(base)); err != nil {
			return err
		}
		status := map[string]any{
			"namespace": clusterNS,
			"summary":   map[string]any{"ready": 0, "desiredReady": 0},
			"display":   map[string]any{"state": fleet.ClusterStateWaitCheckIn},
			"conditions": []metav1.Condition{
				{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ClusterStateWaitCheckIn,
					Message: "waiting for the agent to check in", LastTransitionTime: metav1.Now()},
			},
		}
		return conditions.ApplyStatus(ctx, c, fleet.GroupVersion.WithKind("Cluster"), client.ObjectKeyFromObject(cluster), status, "fleet-cluster")
	})
	s := since(start)
	r := Result{Experiment: "register-floor", Clusters: count, Objects: count, Seconds: s, Rate: float64(count) / s,
		Note: "the 8 writes of each registration made directly: the least in which these registrations can be granted here"}
	before.since(ctx, cp, &r)
	r.APIServerCPUMsPerReg = 1000 * r.APIServerCPUS / float64(count)
	r.WritesPerRegistration = r.APIWritesTotal / float64(count)
	if err != nil {
		return r, err
	}
	// Nothing of them stays for the manager, started after, to act on (the
	// objects carry no finalizers for that: the manager's carry theirs in
	// the same create). The namespaces stay, emptied of all but their
	// RoleBinding: this control plane runs no namespace controller.
	for _, obj := range []client.Object{&fleet.Cluster{}, &fleet.ClusterRegistration{}} {
		if err := c.DeleteAllOf(ctx, obj, client.InNamespace(ws)); err != nil {
			return r, err
		}
	}
	return r, c.DeleteAllOf(ctx, &corev1.ServiceAccount{}, client.InNamespace(agents))
}

// writeReady writes bd's Ready status as an agent does: an update of the
// status alone.
func writeReady(ctx context.Context, c client.Client, bd *fleet.BundleDeployment) error {
	simagent.ReadyStatus(bd)
	body, err := bundledeployment.StatusOnly(bd)
	if err != nil {
		return err
	}
	return c.Status().Update(ctx, body, client.FieldOwner("fleet-agent"))
}

// floorResult is a floor experiment's result: count BundleDeployments
// written since start, the API server's usage since before and its CPU
// profile (prof: profiled as the rollouts set beside the floor are), against
// the custom-resource ceiling; the BundleDeployments of ns are deleted after.
func floorResult(ctx context.Context, cp *controlplane.ControlPlane, c client.Client, ns, name, note string,
	count int, start time.Time, before usage, prof *apiProfiler, crCeiling float64, err error) (Result, error) {
	s := since(start)
	r := Result{Experiment: name, Objects: count, Seconds: s, Rate: float64(count) / s, Note: note}
	before.since(ctx, cp, &r)
	finishProfile(prof, &r)
	r.APIServerCPUMsPerBD = 1000 * r.APIServerCPUS / float64(count)
	if crCeiling > 0 {
		r.CRCeilingRatio = r.Rate / crCeiling
		r.Note += fmt.Sprintf("; %.0f%% of the custom-resource ceiling", 100*r.CRCeilingRatio)
	}
	if err != nil {
		return r, err
	}
	return r, c.DeleteAllOf(ctx, &fleet.BundleDeployment{}, client.InNamespace(ns))
}
