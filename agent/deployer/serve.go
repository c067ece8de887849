package deployer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/deployrpc"
	"github.com/gitfleet/fleet/agent/kinds"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Serve performs the one Request read from in and writes its Response to
// out: the whole of a fleet-agent-deploy run. It bounds the process's
// memory to the Request's MemoryLimit before it renders or applies
// anything. The returned error is for a Request that could not be read or a
// Response that could not be written; the operation's own failure is in the
// Response.
func Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	req := &deployrpc.Request{}
	if err := json.NewDecoder(in).Decode(req); err != nil {
		return fmt.Errorf("reading the request on standard input: %w", err)
	}
	resp := &deployrpc.Response{Version: deployrpc.Version}
	if req.Version != deployrpc.Version {
		resp.Error = deployrpc.EncodeError(fmt.Errorf("request of protocol version %d, this %s speaks %d: install the agent and its deploy binary from one release",
			req.Version, deployrpc.BinaryName, deployrpc.Version))
	} else if err := deployrpc.LimitMemory(req.MemoryLimit); err != nil {
		resp.Error = deployrpc.EncodeError(fmt.Errorf("bounding %s's memory to %d bytes: %w", deployrpc.BinaryName, req.MemoryLimit, err))
	} else {
		resp.Error = deployrpc.EncodeError(serve(ctx, req))
	}
	return json.NewEncoder(out).Encode(resp)
}

func serve(ctx context.Context, req *deployrpc.Request) error {
	cfg := req.Connection.RESTConfig()
	c, err := client.New(cfg, client.Options{Scheme: kinds.Scheme()})
	if err != nil {
		return err
	}
	d, err := New(cfg, c, req.ClusterNamespace)
	if err != nil {
		return err
	}
	d.SystemNamespace, d.NamespaceMissingRetry = req.SystemNamespace, req.NamespaceMissingRetry
	switch {
	case req.Op == deployrpc.OpDeploy && req.Deploy != nil:
		files, err := FilesOf(req.Deploy.Resources)
		if err != nil {
			return outcome.Stall(fleet.ReasonInvalidBundle, err)
		}
		opts := req.Deploy.Options
		if req.Deploy.Chart != nil {
			// A HelmOp's BundleDeployment: no Content, the chart is
			// downloaded here, as Fleet's agent downloads it.
			if files, opts, err = PullChart(ctx, *req.Deploy.Chart, opts, req.ChartCacheDir); err != nil {
				return err
			}
		}
		_, err = d.Deploy(ctx, Input{Name: req.Deploy.Name, DeploymentID: req.Deploy.DeploymentID, Options: opts, Files: files})
		return err
	case req.Op == deployrpc.OpUninstall && req.Uninstall != nil:
		return d.Uninstall(ctx, req.Uninstall)
	}
	return fmt.Errorf("request %q without what it needs", req.Op)
}
