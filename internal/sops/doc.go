// Package sops opens SOPS-encrypted files (YAML, JSON and binary) with the
// agent's own X25519 keys, which are age identities, and checks their MAC.
//
// A bundle may carry files its author encrypted with the sops CLI for the
// age recipients of the clusters that should read them (`fleet secret
// recipients` prints them). The manager passes such files through as any
// other; the agent opens them just before the deploy, with its current and
// previous keys (agent/sealkey), so their values exist in plain text only in
// the agent's memory, the deploy child's stdin and the cluster they are for.
//
// Only what the agent needs is implemented, from SOPS's documented format:
// the data key is read from the file's age stanzas (filippo.io/age), each
// value ENC[AES256_GCM,data:...,iv:...,tag:...,type:...] is opened with it
// (the value's path, "a:b:", as additional data), and the SHA-512 of the
// values in document order is compared with the file's encrypted MAC. Other
// key sources (KMS, PGP, Vault), Shamir key groups and comment-based
// encryption rules are refused with an error that says so. Nothing a file
// holds in plain text ever appears in an error.
package sops
