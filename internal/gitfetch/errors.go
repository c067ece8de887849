package gitfetch

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// ErrPermanent is matched (errors.Is) by errors that retrying cannot fix: the
// GitRepo's spec, its Secret or the repository itself must change.
var ErrPermanent = errors.New("permanent git error")

// Reasons of permanent errors, for conditions (Reason) and tests.
const (
	ReasonAuthFailed       = "AuthenticationFailed"
	ReasonHostKey          = "HostKeyVerificationFailed"
	ReasonTLS              = "TLSVerificationFailed"
	ReasonRepoNotFound     = "RepositoryNotFound"
	ReasonBranchNotFound   = "BranchNotFound"
	ReasonRevisionNotFound = "RevisionNotFound"
	ReasonInvalidOptions   = "InvalidOptions"
)

// Error is a permanent error: Reason is one of the Reason constants and the
// message says what to do.
type Error struct {
	Reason string
	msg    string
	err    error
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the underlying go-git error, if any.
func (e *Error) Unwrap() error { return e.err }

// Is makes permanent errors match ErrPermanent.
func (e *Error) Is(target error) bool { return target == ErrPermanent }

func permanent(reason string, cause error, format string, args ...any) error {
	return &Error{Reason: reason, msg: fmt.Sprintf(format, args...), err: cause}
}

// Reason returns the Reason of a permanent error, or "" for a transient one.
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// classify turns a go-git error from talking to repo into an error that says
// what went wrong and, when a person must act, what to change.
func classify(repo, op string, err error) error {
	if err == nil {
		return nil
	}
	var perm *Error
	if errors.As(err, &perm) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s %s: timed out or cancelled: %w", op, repo, err)
	}
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod):
		return permanent(ReasonAuthFailed, err, "authentication failed for %s: check clientSecretName (%v)", repo, err)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return permanent(ReasonRepoNotFound, err, "repository %s not found: check spec.repo, and clientSecretName if it is private", repo)
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return permanent(ReasonRepoNotFound, err, "repository %s is empty: push a commit to it", repo)
	}
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	if errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalidCert) ||
		strings.Contains(err.Error(), "x509: ") || strings.Contains(err.Error(), "tls: failed to verify") {
		return permanent(ReasonTLS, err, "TLS verification failed for %s: set caBundle to the CA that signed its certificate, or insecureSkipTLSVerify (%v)", repo, err)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "ssh: unable to authenticate"), strings.Contains(msg, "ssh: no auth"):
		return permanent(ReasonAuthFailed, err, "authentication failed for %s: check clientSecretName (%v)", repo, err)
	case strings.Contains(msg, "knownhosts: key mismatch"), strings.Contains(msg, "knownhosts: key is unknown"):
		return permanent(ReasonHostKey, err, "host key verification failed for %s: put the server's current host key in the known_hosts key of the clientSecretName Secret (%v)", repo, err)
	}
	return fmt.Errorf("%s %s: %w", op, repo, err)
}
