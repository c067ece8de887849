package gitfetch

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// classify turns a go-git error from talking to repo into an error that says
// what went wrong and, when a person must act, what to change.
func classify(repo, op string, err error) error {
	if err == nil {
		return nil
	}
	if outcome.IsStalling(err) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s %s: timed out or cancelled: %w", op, repo, err)
	}
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod):
		return outcome.Stallf(fleet.ReasonAuthFailed, "authentication failed for %s: check clientSecretName (%w)", repo, err)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return outcome.Stallf(fleet.ReasonRepoNotFound, "repository %s not found: check spec.repo, and clientSecretName if it is private", repo)
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return outcome.Stallf(fleet.ReasonRepoNotFound, "repository %s is empty: push a commit to it", repo)
	}
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	if errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalidCert) ||
		strings.Contains(err.Error(), "x509: ") || strings.Contains(err.Error(), "tls: failed to verify") {
		return outcome.Stallf(fleet.ReasonTLS, "TLS verification failed for %s: set caBundle to the CA that signed its certificate, or insecureSkipTLSVerify (%w)", repo, err)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "ssh: unable to authenticate"), strings.Contains(msg, "ssh: no auth"):
		return outcome.Stallf(fleet.ReasonAuthFailed, "authentication failed for %s: check clientSecretName (%w)", repo, err)
	case strings.Contains(msg, "knownhosts: key mismatch"), strings.Contains(msg, "knownhosts: key is unknown"):
		return outcome.Stallf(fleet.ReasonHostKey, "host key verification failed for %s: put the server's current host key in the known_hosts key of the clientSecretName Secret (it wins over the known-hosts ConfigMap of the system namespace) (%w)", repo, err)
	}
	return fmt.Errorf("%s %s: %w", op, repo, err)
}
