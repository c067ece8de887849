package intern

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Transform is a cache transform interning the strings that repeat across
// objects: of any object its namespace, labels, annotation keys and owners; of
// BundleDeployments and Clusters their IDs, conditions and display too.
// Other values pass through as they are.
func (p *Pool) Transform(obj any) (any, error) {
	if o, err := meta.Accessor(obj); err == nil {
		p.meta(o)
	}
	switch o := obj.(type) {
	case *fleet.BundleDeployment:
		p.bundleDeployment(o)
	case *fleet.Cluster:
		p.cluster(o)
	}
	return obj, nil
}

func (p *Pool) meta(o metav1.Object) {
	o.SetNamespace(p.String(o.GetNamespace()))
	if l := o.GetLabels(); len(l) > 0 {
		o.SetLabels(p.Map(l))
	}
	if a := o.GetAnnotations(); len(a) > 0 {
		o.SetAnnotations(p.Keys(a))
	}
	if refs := o.GetOwnerReferences(); len(refs) > 0 {
		for i := range refs {
			refs[i].APIVersion, refs[i].Kind = p.String(refs[i].APIVersion), p.String(refs[i].Kind)
			refs[i].Name = p.String(refs[i].Name)
		}
	}
	if f := o.GetFinalizers(); len(f) > 0 {
		for i := range f {
			f[i] = p.String(f[i])
		}
	}
}

func (p *Pool) conditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Status, c.Reason, c.Message = p.String(c.Type), metav1.ConditionStatus(p.String(string(c.Status))), p.String(c.Reason), p.String(c.Message)
	}
}

func (p *Pool) bundleDeployment(bd *fleet.BundleDeployment) {
	bd.Spec.DeploymentID = p.String(bd.Spec.DeploymentID)
	bd.Spec.StagedDeploymentID = p.String(bd.Spec.StagedDeploymentID)
	s := &bd.Status
	s.AppliedDeploymentID, s.Release = p.String(s.AppliedDeploymentID), p.String(s.Release)
	s.Display.Deployed, s.Display.Monitored, s.Display.State = p.String(s.Display.Deployed), p.String(s.Display.Monitored), p.String(s.Display.State)
	p.conditions(s.Conditions)
	for i := range s.Resources {
		r := &s.Resources[i]
		r.Kind, r.APIVersion, r.Namespace, r.Name = p.String(r.Kind), p.String(r.APIVersion), p.String(r.Namespace), p.String(r.Name)
	}
	for i := range s.NonReadyStatus {
		r := &s.NonReadyStatus[i]
		r.Kind, r.APIVersion, r.Namespace, r.Name = p.String(r.Kind), p.String(r.APIVersion), p.String(r.Namespace), p.String(r.Name)
		r.Summary.State = p.String(r.Summary.State)
	}
	for i := range s.ModifiedStatus {
		r := &s.ModifiedStatus[i]
		r.Kind, r.APIVersion, r.Namespace, r.Name = p.String(r.Kind), p.String(r.APIVersion), p.String(r.Namespace), p.String(r.Name)
	}
}

func (p *Pool) cluster(c *fleet.Cluster) {
	s := &c.Status
	s.Namespace = p.String(s.Namespace)
	p.conditions(s.Conditions)
	s.Display.ReadyBundles, s.Display.State = p.String(s.Display.ReadyBundles), p.String(s.Display.State)
	s.APIServerURL, s.APIServerCAHash, s.AgentTLSMode = p.String(s.APIServerURL), p.String(s.APIServerCAHash), p.String(s.AgentTLSMode)
}
