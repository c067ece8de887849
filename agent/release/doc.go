// Package release reads the Helm releases the agent deployed, without
// Helm's SDK.
//
// Helm v3 stores each revision of a release as a Secret named
// sh.helm.release.v1.<name>.v<version> in the release namespace, labelled
// owner=helm, name, status and version, with data "release" holding the
// release as JSON, gzipped and base64-encoded. The resident agent only needs
// a few of its fields (name, namespace, version, status, manifest and the
// chart's annotations): Release holds those, Reader finds and decodes the
// records. Linking Helm's SDK would cost the resident agent the memory that
// its package initialization touches; installing, upgrading and uninstalling
// are left to the fleet-agent-deploy binary (see agent/deployrpc).
package release
