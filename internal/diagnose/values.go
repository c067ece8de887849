package diagnose

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/target"
)

// maxValueDiffs bounds the differences a values finding lists.
const maxValueDiffs = 5

// valuesDiffer compares, for each BundleDeployment, three things that must
// agree and that status and spec carry without the bundle's content:
//
//   - the options the manager would write now for the deployment's cluster:
//     the Bundle's options merged with the targetCustomizations matching
//     the Cluster and its ClusterGroups, Helm values templated for it, by
//     internal/target, the manager's own code;
//   - the options the BundleDeployment holds (staged, then deployed);
//   - the deploymentIDs, which hash the options: the agent deploys by
//     deploymentID and reports appliedDeploymentID, so options that no
//     longer hash to the ID they are stored with are not what the cluster
//     runs.
//
// A Bundle whose new generation the manager has not observed yet is left
// out (that is a rollout in flight, not a difference), and so is a
// deployment whose cluster the bundle no longer targets.
func valuesDiffer(s *Snapshot, _ Options) []Finding {
	bundles := map[string]*fleet.Bundle{}
	for i := range s.Bundles {
		b := &s.Bundles[i]
		bundles[b.Namespace+"/"+b.Name] = b
	}
	clusters := map[string]*fleet.Cluster{}
	for i := range s.Clusters {
		c := &s.Clusters[i]
		clusters[c.Namespace+"/"+c.Name] = c
	}
	groups := make([]*target.CompiledGroup, 0, len(s.ClusterGroups))
	for i := range s.ClusterGroups {
		if g, err := target.CompileGroup(&s.ClusterGroups[i]); err == nil {
			groups = append(groups, g) // a broken group selects nothing, as in the manager
		}
	}
	compiled := map[*fleet.Bundle]*target.CompiledBundle{}
	var out []Finding
	for i := range s.BundleDeployments {
		bd := &s.BundleDeployments[i]
		if f, ok := heldOptionsMismatch(bd); ok {
			out = append(out, f)
			continue
		}
		b := bundles[bd.Labels[fleet.BundleNamespaceLabel]+"/"+bd.Labels[fleet.BundleNameLabel]]
		c := clusters[bd.Labels[fleet.ClusterNamespaceLabel]+"/"+bd.Labels[fleet.ClusterLabel]]
		if b == nil || c == nil || b.Status.ObservedGeneration != b.Generation || !c.DeletionTimestamp.IsZero() {
			continue
		}
		cb, ok := compiled[b]
		if !ok {
			var err error
			if cb, err = target.Compile(b); err != nil {
				cb = nil // invalid targets: the Bundle's own Ready condition says so
			}
			compiled[b] = cb
		}
		if cb == nil {
			continue
		}
		if f, ok := renderedMismatch(bd, b, c, cb, groups); ok {
			out = append(out, f)
		}
	}
	return out
}

// contentOf is the Content name part of a deploymentID
// ("<content>:<options hash>").
func contentOf(id string) string {
	if i := strings.LastIndex(id, ":"); i >= 0 {
		return id[:i]
	}
	return id
}

// heldOptionsMismatch reports a BundleDeployment whose options no longer
// hash to the deploymentID they are stored with: changed after the manager
// wrote them (by hand, or by another writer).
func heldOptionsMismatch(bd *fleet.BundleDeployment) (Finding, bool) {
	for _, held := range []struct {
		what string
		id   string
		opts *fleet.BundleDeploymentOptions
	}{
		{"options", bd.Spec.DeploymentID, &bd.Spec.Options},
		{"stagedOptions", bd.Spec.StagedDeploymentID, &bd.Spec.StagedOptions},
	} {
		if held.id == "" {
			continue
		}
		id, err := target.DeploymentID(contentOf(held.id), *held.opts)
		if err != nil || id == held.id {
			continue
		}
		msg := fmt.Sprintf("spec.%s do not hash to the deploymentID they are stored with (%s): they were changed after the manager wrote them", held.what, held.id)
		if bd.Status.AppliedDeploymentID == held.id {
			msg += fmt.Sprintf("; the agent of cluster %s reports that ID applied, so the cluster runs the options the ID was made from, not these", clusterOf(bd))
		}
		return Finding{Check: CheckValuesDiffer, Severity: Warning, Object: bdObject(bd), Message: msg,
			Action: "do not edit BundleDeployments: change the bundle's fleet.yaml (or its GitRepo, HelmOp) instead; " +
				"the manager writes the BundleDeployment back on its next full pass of the bundle (within minutes), or, if it does not, see its log"}, true
	}
	return Finding{}, false
}

// renderedMismatch reports a BundleDeployment whose staged options are not
// what the manager would render for its cluster now.
func renderedMismatch(bd *fleet.BundleDeployment, b *fleet.Bundle, c *fleet.Cluster, cb *target.CompiledBundle, groups []*target.CompiledGroup) (Finding, bool) {
	content := contentOf(bd.Spec.StagedDeploymentID)
	d, ok, err := target.NewTargeter(cb, content).Target(c, groups)
	switch {
	case err != nil:
		return Finding{Check: CheckValuesDiffer, Severity: Critical, Object: bdObject(bd),
			Message: fmt.Sprintf("the bundle's values no longer render for cluster %s: %v; it keeps the options it had", clusterOf(bd), err),
			Action:  "fix the template in the bundle's helm.values or helm.templateValues (fleet.yaml), or give the cluster the label or value it reads"}, true
	case !ok:
		return Finding{}, false // no longer targeted: the manager removes it, or a deployment window holds it
	case d.ID == bd.Spec.StagedDeploymentID:
		return Finding{}, false
	}
	// A Policy's createNamespace: false is stamped on the options by the
	// manager, after rendering; the snapshot holds no Policies.
	if d.Options.CreateNamespace == nil || *d.Options.CreateNamespace {
		stamped := d.Options.DeepCopy()
		no := false
		stamped.CreateNamespace = &no
		if id, err := target.DeploymentID(content, *stamped); err == nil && id == bd.Spec.StagedDeploymentID {
			return Finding{}, false
		}
	}
	diffs := optionsDiff(&bd.Spec.StagedOptions, d.Options)
	msg := fmt.Sprintf("for cluster %s the manager would now render other options than the BundleDeployment holds (targets %s): %s",
		clusterOf(bd), strings.Join(d.Targets, ", "), strings.Join(diffs, "; "))
	switch applied := bd.Status.AppliedDeploymentID; applied {
	case bd.Spec.StagedDeploymentID:
		msg += "; the cluster runs the held ones"
	case "":
		msg += "; its agent has applied none yet"
	default:
		msg += "; its agent reports " + applied + " applied"
	}
	action := "the manager renders a bundle again when it, the Cluster's labels or its ClusterGroups change: is the manager running"
	if shard := b.Labels[fleet.ShardRefLabel]; shard != "" {
		action += " (the manager of shard " + shard + ")"
	}
	action += "? see the Bundle's Ready condition and the manager's log; a BundleDeployment edited by hand is written back on its next full pass"
	return Finding{Check: CheckValuesDiffer, Severity: Warning, Object: bdObject(bd), Message: msg, Action: action}, true
}

// optionsDiff lists, as "path: held X, now Y", the fields of two options
// that differ (diff and correctDrift left out, as deploymentIDs leave them
// out), at most maxValueDiffs of them.
func optionsDiff(held, now *fleet.BundleDeploymentOptions) []string {
	a, b := asJSON(held), asJSON(now)
	var out []string
	walkDiff("", a, b, &out)
	sort.Strings(out)
	if len(out) > maxValueDiffs {
		out = append(out[:maxValueDiffs], fmt.Sprintf("and %d more", len(out)-maxValueDiffs))
	}
	if len(out) == 0 {
		// Equal as JSON documents, yet hashed differently: say so rather
		// than print nothing.
		out = []string{"the options hash differently"}
	}
	return out
}

func asJSON(o *fleet.BundleDeploymentOptions) interface{} {
	c := o.DeepCopy()
	c.Diff, c.CorrectDrift = nil, nil
	data, err := json.Marshal(c)
	if err != nil {
		return nil
	}
	var v interface{}
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	return v
}

func walkDiff(path string, a, b interface{}, out *[]string) {
	am, aok := a.(map[string]interface{})
	bm, bok := b.(map[string]interface{})
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			walkDiff(p, am[k], bm[k], out)
		}
		return
	}
	if reflect.DeepEqual(a, b) {
		return
	}
	*out = append(*out, fmt.Sprintf("%s: held %s, now %s", path, show(a), show(b)))
}

func show(v interface{}) string {
	if v == nil {
		return "nothing"
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(data) > 80 {
		return string(data[:77]) + "..."
	}
	return string(data)
}
