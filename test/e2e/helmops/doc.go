// Package helmops is the end-to-end spec of HelmOps whose chart the agents
// download, as Fleet's do: a HelmOp naming a chart in an authenticated
// HTTPS chart repository on loopback deploys on two clusters through real
// agents, each downloading the chart with the copy of the HelmOp's Secret
// in its own cluster namespace; the manager's Bundle and Contents hold no
// chart, and one cluster's agent cannot read the other's copy.
package helmops
