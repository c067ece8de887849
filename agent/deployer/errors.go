package deployer

import (
	"errors"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gitfleet/fleet/internal/outcome"
)

// transientMessages are signs of an unreachable or overloaded API server in
// errors that Helm turned into plain strings.
var transientMessages = []string{
	"connection refused", "connection reset", "i/o timeout", "cluster unreachable", "EOF",
	"TLS handshake timeout", "no route to host", "context deadline exceeded", "http2: client connection lost",
	"the server is currently unable", "etcdserver", "another operation (install/upgrade/rollback) is in progress",
	"the object has been modified", "rate limiter", "context canceled",
}

// IsTransient tells whether err may go away by itself, so that the
// deployment is worth retrying with backoff. A Stalling error never is.
func IsTransient(err error) bool {
	if err == nil || outcome.IsStalling(err) {
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

// stallUnlessTransient makes err, when retrying it cannot help, a Stalling
// error with reason: the bundle's author must change the bundle. Transient
// and already Stalling errors stay as they are.
func stallUnlessTransient(reason string, err error) error {
	if err == nil || IsTransient(err) || outcome.IsStalling(err) {
		return err
	}
	return outcome.Stall(reason, err)
}
