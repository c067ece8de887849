package framework

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitfleet/fleet/internal/localcluster"
)

// Process is a long-running binary with its output in a log file
// (localcluster.Process, which `fleet dev` runs its processes with too).
type Process = localcluster.Process

// Start runs a built binary (see Binaries) in the background, logging to
// dir/logName.log. It dies with this process.
func Start(dir, logName, binary string, args ...string) (*Process, error) {
	bin, err := Binary(binary)
	if err != nil {
		return nil, err
	}
	return localcluster.StartFile(dir, logName, bin, nil, args...)
}

// StartFile runs the binary at path in the background, logging to
// dir/logName.log, as Start does for a binary that Binaries built: one built
// otherwise (other flags, another version) is measured the same way. env
// is added to this process's environment.
func StartFile(dir, logName, path string, env []string, args ...string) (*Process, error) {
	return localcluster.StartFile(dir, logName, path, env, args...)
}

// ApplyYAML applies every document of a YAML stream with server-side apply,
// as `kubectl apply --server-side` would (localcluster.ApplyYAML).
func ApplyYAML(ctx context.Context, c client.Client, data []byte) error {
	return localcluster.ApplyYAML(ctx, c, data)
}

// DecodeYAML splits a YAML stream into objects (localcluster.DecodeYAML).
func DecodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	return localcluster.DecodeYAML(data)
}
