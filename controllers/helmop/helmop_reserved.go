package helmop

import (
	"errors"
	"fmt"
	"sort"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/bundlereader"
	"github.com/gitfleet/fleet/internal/names"
)

// checkReserved refuses what a HelmOp may not claim, as a fleet.yaml may
// not: the name of an agent Bundle (its Bundle is named after it) and
// labels of fleet's own domain in spec.labels, which are copied to the
// Bundle.
func checkReserved(op *fleet.HelmOp) error {
	if names.ReservedBundleName(op.Name) {
		return fmt.Errorf("the name %q begins with %q, which is reserved for the agent Bundles fleet makes: give the HelmOp another name",
			op.Name, names.AgentBundlePrefix)
	}
	keys := make([]string, 0, len(op.Spec.Labels))
	for k := range op.Spec.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if names.ReservedLabelKey(k) {
			return errors.New(bundlereader.ReservedLabelMessage("spec.labels", k))
		}
	}
	return nil
}
