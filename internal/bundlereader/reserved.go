package bundlereader

import (
	"fmt"
	"sort"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/gitfleet/fleet/internal/names"
)

// What a fleet.yaml may not claim, whoever controls the repository: the
// name of an agent Bundle (the cluster's agent Bundle could not be written
// under it, which freezes its agent's settings and upgrades) and labels of
// fleet's own domain (a BundleNamespaceMapping or an agent Bundle is told
// by them).

// validateReserved refuses a name beginning with names.AgentBundlePrefix
// and labels whose key is in names.ReservedLabelDomain, naming the field and
// its line.
func (fy *FleetYAML) validateReserved(root *yamlv3.Node) error {
	if names.ReservedBundleName(fy.Name) {
		return &fieldError{line: lineAt(root, "name"), msg: reservedNameMessage("name", fy.Name)}
	}
	keys := make([]string, 0, len(fy.Labels))
	for k := range fy.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if names.ReservedLabelKey(k) {
			return &fieldError{line: lineAt(root, "labels", k), msg: ReservedLabelMessage("labels", k)}
		}
	}
	return nil
}

// reservedNameMessage says that field's bundle name is reserved and what to
// do.
func reservedNameMessage(field, name string) string {
	return fmt.Sprintf("%s: bundle name %q begins with %q, which is reserved for the agent Bundles fleet makes: choose another name",
		field, name, names.AgentBundlePrefix)
}

// ReservedLabelMessage says that the label key of field is reserved and
// what to do.
func ReservedLabelMessage(field, key string) string {
	return fmt.Sprintf("%s: label key %q is reserved: keys of %s and its subdomains are set by fleet only: use a key of your own domain",
		field, key, names.ReservedLabelDomain)
}

// checkDerivedName refuses a bundle name made from the base name and the
// directory (no name: in fleet.yaml) that begins with
// names.AgentBundlePrefix.
func (r *reader) checkDerivedName(name, file string) error {
	if !names.ReservedBundleName(name) {
		return nil
	}
	return invalidf("%s: bundle name %q, made from the name %q and the bundle's directory, begins with %q, which is reserved for the agent Bundles fleet makes: set another name: in %s",
		file, name, r.o.Name, names.AgentBundlePrefix, file)
}
