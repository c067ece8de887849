// Package sealing seals the Secrets and ConfigMaps a BundleDeployment's
// downstreamResources name to the key of the one agent that deploys it.
//
// Each agent keeps an X25519 key pair of its own: the private key in its
// downstream fleet-agent Secret, never sent anywhere, the public key on its
// check-in Lease upstream (fleet.SealingKeyAnnotation), which only it and
// the manager may write. The manager seals with an ephemeral key of its own:
// an AES-256-GCM key derived with HKDF-SHA256 from the X25519 shared secret
// (salt: both public keys; info: the BundleDeployment's namespace and name),
// the same namespace and name as additional data. So the sealed copy in a
// BundleDeployment opens only with that cluster's agent key, and only as
// that BundleDeployment: moved to another cluster namespace (or renamed) it
// opens nowhere, not even for the agent it was sealed to.
//
// The agent rotates its key with its credential and keeps the previous one
// until everything is sealed to the new one (Recipient names the key by
// fingerprint), so rotation loses no access.
package sealing
