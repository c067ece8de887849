// Package agentupgrade is the end-to-end suite of agent settings and
// upgrades through agent Bundles (controllers/agentbundle): ten clusters,
// each a real control plane running kube-controller-manager, join (nine by
// token, one imported through its kubeconfig) with their agent run from its own Deployment by Kubelet (which plays the
// kubelet for the agent's pods: one fleet-agent process per pod, with the
// binary the pod's image stands for); a new agent version offered by the
// manager reaches every cluster with at most the configured share in flight
// at any time (sampled from the downstream Deployments all along), the
// releases they run untouched; a Cluster's agent settings reach its
// Deployment; and a version that cannot start stops the rollout while the
// old agents keep running.
package agentupgrade
