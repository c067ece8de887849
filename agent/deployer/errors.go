package deployer

import (
	"errors"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// UserError is a failure the bundle's author must fix (a chart that does not
// render, an object the API server rejects): retrying the same deployment
// would fail the same way.
type UserError struct{ Err error }

func (e *UserError) Error() string { return e.Err.Error() }
func (e *UserError) Unwrap() error { return e.Err }

// IsUserError tells whether err is a UserError.
func IsUserError(err error) bool {
	var ue *UserError
	return errors.As(err, &ue)
}

// transientMessages are signs of an unreachable or overloaded API server in
// errors that Helm turned into plain strings.
var transientMessages = []string{
	"connection refused", "connection reset", "i/o timeout", "cluster unreachable", "EOF",
	"TLS handshake timeout", "no route to host", "context deadline exceeded", "http2: client connection lost",
	"the server is currently unable", "etcdserver", "another operation (install/upgrade/rollback) is in progress",
	"the object has been modified", "rate limiter", "context canceled",
}

// IsTransient tells whether err may go away by itself, so that the
// deployment is worth retrying with backoff.
func IsTransient(err error) bool {
	if err == nil || IsUserError(err) {
		return false
	}
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsConflict(err) ||
		apierrors.IsUnexpectedServerError(err) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	msg := err.Error()
	for _, s := range transientMessages {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// classify marks errors that are not transient as user errors.
func classify(err error) error {
	if err == nil || IsTransient(err) || IsUserError(err) {
		return err
	}
	return &UserError{Err: err}
}
