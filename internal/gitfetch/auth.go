package gitfetch

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	corev1 "k8s.io/api/core/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// KnownHostsKey is the key of an SSH Secret (and of the KnownHostsConfigMap)
// that holds the server's host keys in known_hosts format.
const KnownHostsKey = "known_hosts"

// KnownHostsConfigMap is the ConfigMap of the system namespace whose
// known_hosts are trusted for SSH repositories whose Secret has none: where
// Fleet keeps the host keys of the well-known git hosts.
const KnownHostsConfigMap = "known-hosts"

// DefaultClientSecretName is the Secret a GitRepo without clientSecretName
// takes its credentials from when it exists in the GitRepo's namespace, as
// in Fleet.
const DefaultClientSecretName = "gitcredential" //nolint:gosec // G101: the name of a Secret, not a credential

// authMethod builds the go-git credentials for ep from the options' Secret,
// if any. SSH always verifies the server's host key: without known_hosts
// (from the Secret or o.KnownHosts) it fails rather than trust whatever key
// the server shows.
func (f *Fetcher) authMethod(ctx context.Context, ep *transport.Endpoint, o Options) (transport.AuthMethod, error) {
	repo, secret := o.URL, o.Secret
	switch ep.Protocol {
	case "file":
		return nil, nil
	case "ssh":
		return sshAuth(ep, repo, secret, o.KnownHosts)
	case "http", "https":
		if secret == nil {
			return nil, nil
		}
		if isGitHubApp(secret) {
			return f.gitHubAppAuth(ctx, secret, ep.Host, o.CABundle)
		}
		if _, ok := secret.Data[corev1.SSHAuthPrivateKey]; ok || secret.Type == corev1.SecretTypeSSHAuth {
			return nil, outcome.Stallf(fleet.ReasonInvalidOptions,
				"Secret %s holds an SSH key but %s is %s: use an ssh:// (or git@host:path) URL, or a kubernetes.io/basic-auth Secret with username and password",
				secret.Name, repo, ep.Protocol)
		}
		user, password := secret.Data[corev1.BasicAuthUsernameKey], secret.Data[corev1.BasicAuthPasswordKey]
		if len(password) == 0 {
			return nil, outcome.Stallf(fleet.ReasonInvalidOptions,
				"Secret %s has no %q key: a clientSecretName for an %s repository must be a kubernetes.io/basic-auth Secret with username and password (a token as password), or hold GitHub App credentials (%s, %s, %s)",
				secret.Name, corev1.BasicAuthPasswordKey, ep.Protocol, GitHubAppIDKey, GitHubAppInstallationIDKey, GitHubAppPrivateKeyKey)
		}
		return &githttp.BasicAuth{Username: string(user), Password: string(password)}, nil
	default:
		return nil, outcome.Stallf(fleet.ReasonInvalidOptions, "unsupported repository URL %s: use https://, http://, ssh://, git@host:path or a file path", repo)
	}
}

func sshAuth(ep *transport.Endpoint, repo string, secret *corev1.Secret, fallback []byte) (transport.AuthMethod, error) {
	if secret == nil {
		return nil, outcome.Stallf(fleet.ReasonInvalidOptions,
			"%s is an SSH repository but the GitRepo has no clientSecretName (and there is no %s Secret): create a kubernetes.io/ssh-auth Secret with %s and %s keys and name it in clientSecretName",
			repo, DefaultClientSecretName, corev1.SSHAuthPrivateKey, KnownHostsKey)
	}
	knownHosts := secret.Data[KnownHostsKey]
	if len(knownHosts) == 0 {
		knownHosts = fallback
	}
	if len(knownHosts) == 0 {
		return nil, outcome.Stallf(fleet.ReasonHostKey,
			"Secret %s has no %s key and the %s ConfigMap of the system namespace has none either: add the SSH host keys of %s (e.g. the output of `ssh-keyscan %s`) under %s; host keys are never trusted blindly",
			secret.Name, KnownHostsKey, KnownHostsConfigMap, ep.Host, ep.Host, KnownHostsKey)
	}
	user := ep.User
	if user == "" {
		user = string(secret.Data[corev1.BasicAuthUsernameKey])
	}
	if user == "" {
		user = "git"
	}
	helper, err := hostKeyHelper(ep, secret.Name, knownHosts)
	if err != nil {
		return nil, err
	}
	if key, ok := secret.Data[corev1.SSHAuthPrivateKey]; ok {
		auth, err := gitssh.NewPublicKeys(user, key, "")
		if err != nil {
			return nil, outcome.Stallf(fleet.ReasonInvalidOptions, "Secret %s: %s is not a usable unencrypted private key: %w", secret.Name, corev1.SSHAuthPrivateKey, err)
		}
		auth.HostKeyCallbackHelper = helper
		return auth, nil
	}
	if password, ok := secret.Data[corev1.BasicAuthPasswordKey]; ok {
		return &gitssh.Password{User: user, Password: string(password), HostKeyCallbackHelper: helper}, nil
	}
	return nil, outcome.Stallf(fleet.ReasonInvalidOptions,
		"Secret %s has neither %s nor %s: an SSH repository needs a kubernetes.io/ssh-auth Secret with a private key",
		secret.Name, corev1.SSHAuthPrivateKey, corev1.BasicAuthPasswordKey)
}

// hostKeyHelper verifies host keys against the known_hosts data. The go-git
// helper reads known_hosts files, so the data goes through a temporary file
// that is removed once read.
func hostKeyHelper(ep *transport.Endpoint, secretName string, knownHosts []byte) (gitssh.HostKeyCallbackHelper, error) {
	f, err := os.CreateTemp("", "known_hosts-")
	if err != nil {
		return gitssh.HostKeyCallbackHelper{}, fmt.Errorf("writing known_hosts: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(knownHosts)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return gitssh.HostKeyCallbackHelper{}, fmt.Errorf("writing known_hosts: %w", err)
	}
	db, err := gitssh.NewKnownHostsDb(f.Name())
	if err != nil {
		return gitssh.HostKeyCallbackHelper{}, outcome.Stallf(fleet.ReasonHostKey, "Secret %s: %s is not valid known_hosts data: %w", secretName, KnownHostsKey, err)
	}
	port := ep.Port
	if port == 0 {
		port = 22
	}
	hostPort := net.JoinHostPort(ep.Host, strconv.Itoa(port))
	return gitssh.HostKeyCallbackHelper{
		HostKeyCallback:   db.HostKeyCallback(),
		HostKeyAlgorithms: db.HostKeyAlgorithms(hostPort),
	}, nil
}
