package egress

import (
	"context"
	"errors"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Message is all a tenant learns of a refused destination, whatever it
// was, whether something listens there or not: the same words for every
// address and port, so the status of a GitRepo or HelmOp cannot be used to
// map what the manager can reach.
const Message = "the destination is refused by the manager's outbound policy: use a repository or chart server " +
	"on the network the manager serves, or ask its operator to allow the address (fleet-manager --egress-allow-cidrs)"

// ErrRefused is what errors.Is finds in the error of a connection the
// policy refused.
var ErrRefused = errors.New("destination refused by the outbound policy")

// RefusedError is a connection the policy refused: to which address and by
// which rule. It is for the manager's log; tenants get Message.
type RefusedError struct {
	// Addr is the address refused, with its port when known.
	Addr string
	// Rule says why: the prefix that holds it and the flag that changes it.
	Rule string
}

func (e *RefusedError) Error() string {
	return "connecting to " + e.Addr + refusedMarker + e.Rule
}

// refusedMarker is in the text of every RefusedError. Some libraries (go-git
// on a fetch's second request) wrap a dial error in one that does not
// unwrap: ForTenant finds a refusal there by its text, so the detail never
// reaches a tenant's status.
const refusedMarker = " refused by the outbound policy: "

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// refused is the error a Dialer fails with: Stalling with
// ReasonDestinationRefused, since retrying cannot change the answer, so
// that every layer between the Dialer and the controller (which keep a
// Stalling error as it is) leaves it alone.
func refused(e *RefusedError) error {
	return outcome.Stall(fleet.ReasonDestinationRefused, e)
}

// ForTenant returns err unchanged unless a connection in it was refused by
// the policy: then it logs err, which says which address and rule, to the
// manager's log and returns a Stalling error with
// fleet.ReasonDestinationRefused and Message alone, for the status of the
// tenant's object.
func ForTenant(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, ErrRefused) && !strings.Contains(err.Error(), refusedMarker) {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Refused an outbound connection made for a tenant", "detail", err.Error())
	return outcome.Stall(fleet.ReasonDestinationRefused, errors.New(Message))
}
