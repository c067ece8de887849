package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Every kind with status conditions offers them through GetConditions and
// SetConditions, so that one set of helpers serves them all.

// GetConditions returns the Bundle's status conditions.
func (b *Bundle) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions replaces the Bundle's status conditions.
func (b *Bundle) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }

// GetConditions returns the BundleDeployment's status conditions.
func (b *BundleDeployment) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions replaces the BundleDeployment's status conditions.
func (b *BundleDeployment) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }

// GetConditions returns the Cluster's status conditions.
func (c *Cluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the Cluster's status conditions.
func (c *Cluster) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// GetConditions returns the ClusterGroup's status conditions.
func (g *ClusterGroup) GetConditions() []metav1.Condition { return g.Status.Conditions }

// SetConditions replaces the ClusterGroup's status conditions.
func (g *ClusterGroup) SetConditions(c []metav1.Condition) { g.Status.Conditions = c }

// GetConditions returns the GitRepo's status conditions.
func (r *GitRepo) GetConditions() []metav1.Condition { return r.Status.Conditions }

// SetConditions replaces the GitRepo's status conditions.
func (r *GitRepo) SetConditions(c []metav1.Condition) { r.Status.Conditions = c }

// GetConditions returns the ClusterRegistration's status conditions.
func (r *ClusterRegistration) GetConditions() []metav1.Condition { return r.Status.Conditions }

// SetConditions replaces the ClusterRegistration's status conditions.
func (r *ClusterRegistration) SetConditions(c []metav1.Condition) { r.Status.Conditions = c }
