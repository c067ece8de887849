// Package gitfetch fetches git repositories for the GitRepo controller, in
// process with go-git: no git binary, Job or pod is involved.
//
// LatestCommit is the cheap question asked on every poll: one ls-remote that
// resolves the branch (by default the branch the remote's HEAD points to), a
// tag, or a commit sha (which needs no network at all). Checkout is the
// expensive step, taken only when that answer changed: it fetches into an
// on-disk cache, one directory per GitRepo and repository URL, and writes the
// commit's files into a work directory that bundlereader then reads. The
// object store is kept between calls, so later checkouts fetch only what is
// new. The first fetch is shallow (depth 1) over the network; when the server
// cannot do that, or the wanted commit is no longer the tip, the cache is
// rebuilt with a full fetch.
//
// Credentials are Fleet's: a kubernetes.io/basic-auth Secret (username and
// password, or a token as password), a kubernetes.io/ssh-auth Secret whose
// host keys come from its known_hosts key or Options.KnownHosts (Fleet's
// known-hosts ConfigMap), or GitHub App credentials, for which an
// installation token is minted from the GitHub API (Fetcher.GitHubAPIURL)
// and cached until shortly before it expires. Choosing the Secret (the
// GitRepo's clientSecretName, else DefaultClientSecretName) is the caller's
// job.
//
// Errors come in two kinds. Those only a person can fix (authentication,
// host key or TLS verification, a missing repository, branch or revision, a
// malformed credentials Secret) are outcome.Stalling errors with one of the
// git Reasons of api/v1alpha1 and a message that says what to change;
// anything else (the network, a timeout) is a plain error, transient and
// worth retrying.
//
// Local repositories (a file path or file:// URL) are served by go-git's
// in-process server, installed for the "file" scheme when this package is
// loaded, so they too work without a git binary.
package gitfetch
