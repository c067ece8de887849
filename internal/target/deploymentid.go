package target

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// DeploymentID names what an agent must deploy:
// "<contentName>:<sha256 hex of the JSON of opts>", with opts' diff and
// correctDrift left out since they change how the agent watches a release,
// not what it deploys. contentName is the Content's name (names.Content). The
// ID is deterministic: encoding/json writes struct fields in order and map
// keys sorted. Pass the options after per-cluster templating, so that clusters
// whose rendered values differ get different IDs.
func DeploymentID(contentName string, opts fleet.BundleDeploymentOptions) (string, error) {
	opts.Diff = nil // opts is a copy; the caller's pointers are untouched
	opts.CorrectDrift = nil
	b, err := json.Marshal(opts)
	if err != nil {
		return "", fmt.Errorf("deployment ID: options: %w", err)
	}
	sum := sha256.Sum256(b)
	return contentName + ":" + hex.EncodeToString(sum[:]), nil
}
