// Package gitshare lets GitRepos that follow the same repository share its
// git traffic: one ls-remote per polling interval and one fetch per new
// commit, whatever the number of GitRepos (different paths, namespaces or
// targets) reading it.
//
// GitRepos share only when everything that decides what the remote answers
// them is identical: the URL, the branch or revision, and the credential
// identity, a hash of the credentials Secret's type and data, the CA bundle,
// insecureSkipTLSVerify and the SSH host keys (Group). A GitRepo with
// credentials of its own is a group of its own: it asks the remote with its
// own credentials, and a tenant whose credentials the remote refuses fails
// even when another tenant's fetch of the same URL succeeded. What decides
// whether a GitRepo may fetch at all (restrictions, allowed repositories,
// the egress policy) is the caller's, per GitRepo, before it asks.
//
// A Share wraps a gitfetch.Fetcher: the group's object store is one cache
// directory of it, and each fetched commit's files are kept in a tree
// directory keyed by group and commit, leased to the readers while they
// read it, and evicted (least recently used, unleased only) beyond a byte
// budget or when a newer commit of the same group arrives. A newer commit
// is written over the group's last tree when nobody reads it, so that it
// costs the files it changed, not every file of the repository. Concurrent
// requests for the same answer or the same commit are made once, and every
// caller waits for that one result. A caller's Gate (its namespace's fetch
// slots) is asked only when the Share calls the remote on its behalf: one
// that takes its group's answer and files waits for no slot.
package gitshare
