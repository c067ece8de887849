package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/install"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/scheme"
)

func newInstall() *cobra.Command {
	cmd := &cobra.Command{Use: "install", Short: "Print manifests that install the manager or an agent"}
	cmd.AddCommand(newInstallController(), newInstallAgentToken(), newInstallAgentConfig())
	return cmd
}

func newInstallController() *cobra.Command {
	o := install.ControllerOptions{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Print the manifests that install the manager (CRDs, RBAC, Deployment); needs no cluster",
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := install.ControllerYAML(o)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.CRDsOnly, "crds-only", false, "print only the CustomResourceDefinitions")
	f.StringVar(&o.ControllerImage, "controller-image", install.DefaultControllerImage, "manager image")
	f.StringVar(&o.AgentImage, "agent-image", agentinstall.DefaultImage, "agent image the manager installs into imported clusters")
	f.StringVar(&o.SystemNamespace, "system-namespace", fleet.DefaultSystemNamespace, "namespace the manager runs in")
	f.StringSliceVar(&o.ImagePullSecrets, "image-pull-secret", nil,
		"Secret of the system namespace that pulls the manager's image and, copied into each agent's namespace, the agent's (repeatable)")
	return cmd
}

type agentTokenOptions struct {
	kubeconfig      string
	namespace       string
	name            string
	cluster         string
	ttl             time.Duration
	serverURL       string
	caFile          string
	noCA            bool
	systemNamespace string
	agentImage      string
}

func newInstallAgentToken() *cobra.Command {
	o := &agentTokenOptions{}
	cmd := &cobra.Command{
		Use:   "agent-token",
		Short: "Create a registration token on the manager's cluster and print the manifest that installs an agent with it",
		Long: `Creates a ClusterRegistrationToken on the manager's cluster (from -k, $KUBECONFIG or ~/.kube/config) and
prints a manifest; applied to a cluster, it installs the agent, which registers that cluster with the token.
The manager's URL and CA are taken from the kubeconfig unless --server-url and --ca-file are given.

A token made with --cluster NAME registers that one Cluster only. It is what brings back a cluster whose
agent has checked in before and lost its credential: a token without --cluster may not register onto a
Cluster that already has an agent, as knowing a cluster's clientID is no proof of being that cluster.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgentToken(cmd.Context(), cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.kubeconfig, "kubeconfig", "k", "", "kubeconfig of the manager's cluster (default $KUBECONFIG or ~/.kube/config)")
	f.StringVarP(&o.namespace, "group", "g", fleet.DefaultWorkspace, "workspace namespace the cluster registers into")
	f.StringVarP(&o.name, "name", "n", "", "token name (default: generated)")
	f.StringVar(&o.cluster, "cluster", "", "bind the token to this Cluster of the group: it registers that cluster only, and may register it again after its agent lost its credential")
	f.DurationVar(&o.ttl, "ttl", 7*24*time.Hour, "token lifetime; 0 means it never expires")
	f.StringVar(&o.serverURL, "server-url", "", "URL agents use to reach the manager's API server (default: from the kubeconfig)")
	f.StringVar(&o.caFile, "ca-file", "", "CA certificate of the manager's API server (default: from the kubeconfig)")
	f.BoolVar(&o.noCA, "no-ca", false, "use the system's trusted CAs instead of a CA in the manifest")
	f.StringVar(&o.systemNamespace, "system-namespace", fleet.DefaultSystemNamespace, "namespace of the agent in the cluster, and of the manager")
	f.StringVar(&o.agentImage, "agent-image", agentinstall.DefaultImage, "agent image")
	return cmd
}

func runAgentToken(ctx context.Context, cmd *cobra.Command, o *agentTokenOptions) error {
	if o.ttl < 0 {
		return fmt.Errorf("--ttl must not be negative")
	}
	cfg, err := kubeconfig.Load(o.kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	fmt.Fprintf(cmd.ErrOrStderr(), "==> Creating a registration token in %s on %s\n", o.namespace, cfg.Host)
	token, boot, err := agentinstall.CreateToken(ctx, c, agentinstall.TokenOptions{Namespace: o.namespace, Name: o.name, TTL: o.ttl, Cluster: o.cluster})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "==> Created ClusterRegistrationToken %s/%s; printing the agent's manifest\n", token.Namespace, token.Name)
	boot.APIServerURL = firstNonEmpty(o.serverURL, cfg.Host)
	switch {
	case o.noCA:
		boot.APIServerCA = ""
	case o.caFile != "":
		ca, err := os.ReadFile(o.caFile)
		if err != nil {
			return fmt.Errorf("reading --ca-file: %w", err)
		}
		boot.APIServerCA = string(ca)
	case len(cfg.CAData) > 0:
		boot.APIServerCA = string(cfg.CAData)
	case cfg.CAFile != "":
		ca, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return fmt.Errorf("reading the kubeconfig's CA file: %w", err)
		}
		boot.APIServerCA = string(ca)
	}
	objs, err := agentinstall.Objects(agentinstall.Options{Namespace: o.systemNamespace, Image: o.agentImage, Bootstrap: boot})
	if err != nil {
		return err
	}
	out, err := agentinstall.YAML(objs)
	if err != nil {
		return err
	}
	_, err = cmd.OutOrStdout().Write(out)
	return err
}

type agentConfigOptions struct {
	labels          map[string]string
	clientID        string
	systemNamespace string
}

func newInstallAgentConfig() *cobra.Command {
	o := &agentConfigOptions{}
	cmd := &cobra.Command{
		Use:   "agent-config",
		Short: "Print the ConfigMap that gives a cluster its labels (and optionally identity) when it registers",
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := agentinstall.Objects(agentinstall.Options{
				Namespace:    o.systemNamespace,
				Config:       &agentinstall.AgentConfig{Labels: o.labels, ClientID: o.clientID},
				NoDeployment: true,
			})
			if err != nil {
				return err
			}
			out, err := agentinstall.YAML(objs)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringToStringVarP(&o.labels, "label", "l", nil, "label of the cluster, k=v (repeatable)")
	f.StringVar(&o.clientID, "client-id", "", "cluster identity (default: the UID of its kube-system namespace)")
	f.StringVar(&o.systemNamespace, "system-namespace", fleet.DefaultSystemNamespace, "namespace of the agent in the cluster")
	return cmd
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
