package outcome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// ConflictWait is how long a reconcile whose status write conflicted waits
// before it looks again: time for the cache to show the write that won.
const ConflictWait = time.Second

// PatchOption changes how PatchStatus writes.
type PatchOption func(*patchOptions)

type patchOptions struct {
	lock  bool
	owner string
}

// WithOptimisticLock makes the patch, when lock is set, carry before's
// resourceVersion, so that it fails with a conflict (a Wait) rather than
// overwrite what another writer wrote since: for a list another writer
// shares (a merge patch replaces a list whole).
func WithOptimisticLock(lock bool) PatchOption {
	return func(o *patchOptions) { o.lock = lock }
}

// WithFieldOwner writes under field manager owner.
func WithFieldOwner(owner string) PatchOption {
	return func(o *patchOptions) { o.owner = owner }
}

// PatchStatus is the one way a reconciler writes the status it owns whole:
// a JSON merge patch of what obj's status changed since before (the object
// as the reconcile read it), sent only when it changed. Where several
// writers share one status, each applies its own fields instead
// (conditions.ApplyStatus).
//
// obj keeps the status it was given and takes the resourceVersion of the
// write: the answer is read as metadata only.
//
// A missing object is not an error: it is gone, and so is its status. A
// conflict (WithOptimisticLock, or a cache behind) is a Wait of ConflictWait
// with reason StaleRead. Other errors name the object, for backoff.
func PatchStatus(ctx context.Context, c client.Client, before, obj client.Object, opts ...PatchOption) error {
	var o patchOptions
	for _, opt := range opts {
		opt(&o)
	}
	if statusUnchanged(before, obj) {
		return nil
	}
	what := fmt.Sprintf("%s %s", kindOf(obj), client.ObjectKeyFromObject(obj))
	status, changed, err := statusPatch(before, obj)
	if err != nil {
		return fmt.Errorf("computing the status patch of %s: %w", what, err)
	}
	if !changed {
		return nil
	}
	body := map[string]any{"status": status}
	if o.lock {
		body["metadata"] = map[string]any{"resourceVersion": before.GetResourceVersion()}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("computing the status patch of %s: %w", what, err)
	}
	var popts []client.SubResourcePatchOption
	if o.owner != "" {
		popts = append(popts, client.FieldOwner(o.owner))
	}
	patch := client.RawPatch(types.MergePatchType, raw)
	if target, ok := metadataOf(c, obj); ok {
		// The API server answers with the object's metadata alone: the
		// status was just computed here, and decoding it back whole (at
		// every status write of every reconciler) costs as much as the
		// request. obj takes the new resourceVersion, for a later write
		// under the optimistic lock.
		err = c.Status().Patch(ctx, target, patch, popts...)
		if err == nil {
			obj.SetResourceVersion(target.GetResourceVersion())
		}
	} else {
		err = c.Status().Patch(ctx, obj, patch, popts...)
	}
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return Wait(fleet.ReasonStaleRead, ConflictWait, fmt.Errorf("%s changed since it was read: its status is written again from a fresher read: %w", what, err))
	}
	return fmt.Errorf("writing the status of %s: %w", what, err)
}

// metadataOf is obj as metadata alone, for a write whose answer is read as
// such: false when its kind is not known to c's scheme.
func metadataOf(c client.Client, obj client.Object) (*metav1.PartialObjectMetadata, bool) {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return nil, false
	}
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Namespace: obj.GetNamespace()}}
	m.SetGroupVersionKind(gvk)
	return m, true
}

// statusPatch is the JSON merge patch of what obj's status changed since
// before's, and whether there is any. Only the two statuses are encoded
// and compared, not the whole objects: the patch is the same (a merge
// patch of the objects holds, under "status", the merge patch of their
// statuses), and a reconcile that writes its status at every change would
// otherwise encode and diff the spec and metadata each time too.
func statusPatch(before, obj client.Object) (json.RawMessage, bool, error) {
	b, o, ok := statusValues(before, obj)
	if !ok {
		// Not a typed object with a Status field: the whole objects.
		return wholeStatusPatch(before, obj)
	}
	if patch, ok, err := fieldPatch(b, o); ok {
		if err != nil {
			return nil, false, err
		}
		return patch, string(patch) != "{}", nil
	}
	bj, err := json.Marshal(addr(b))
	if err != nil {
		return nil, false, err
	}
	oj, err := json.Marshal(addr(o))
	if err != nil {
		return nil, false, err
	}
	if len(bj) == 0 || bj[0] != '{' || len(oj) == 0 || oj[0] != '{' {
		// A status that is not a JSON object (a nil pointer): the whole
		// objects say what to write.
		return wholeStatusPatch(before, obj)
	}
	diff, err := jsonpatch.CreateMergePatch(bj, oj)
	if err != nil {
		return nil, false, err
	}
	if string(diff) == "{}" {
		return nil, false, nil
	}
	return diff, true, nil
}

// wholeStatusPatch is statusPatch from the merge patch of the whole
// objects.
func wholeStatusPatch(before, obj client.Object) (json.RawMessage, bool, error) {
	data, err := client.MergeFrom(before).Data(obj)
	if err != nil {
		return nil, false, err
	}
	var diff map[string]json.RawMessage
	if err := json.Unmarshal(data, &diff); err != nil {
		return nil, false, err
	}
	status, changed := diff["status"]
	return status, changed, nil
}

// addr is v's address when it has one, so that it encodes as it does
// inside its object (a MarshalJSON of a pointer receiver included).
func addr(v reflect.Value) any {
	if v.CanAddr() {
		return v.Addr().Interface()
	}
	return v.Interface()
}

// statusValues are the Status fields of before and obj, when both are
// pointers to the same struct type with one.
func statusValues(before, obj client.Object) (reflect.Value, reflect.Value, bool) {
	b, o := reflect.ValueOf(before), reflect.ValueOf(obj)
	if b.Kind() != reflect.Pointer || b.Type() != o.Type() || b.IsNil() || o.IsNil() || b.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, reflect.Value{}, false
	}
	bStatus, oStatus := b.Elem().FieldByName("Status"), o.Elem().FieldByName("Status")
	if !bStatus.IsValid() || !oStatus.IsValid() {
		return reflect.Value{}, reflect.Value{}, false
	}
	return bStatus, oStatus, true
}

// statusUnchanged says whether obj's Status field is before's, value for
// value (reflect.DeepEqual: a nil list is not an empty one, a time is the
// same instant in the same form), so that their JSON is the same and the
// merge patch would hold no status: most reconciles change nothing, and
// two JSON encodings and a diff of the whole object each cost more than
// this comparison.
func statusUnchanged(before, obj client.Object) bool {
	b, o, ok := statusValues(before, obj)
	return ok && reflect.DeepEqual(b.Interface(), o.Interface())
}

// Written combines a reconcile's result and error with the error of its
// status write: a write that failed must be retried, whatever the
// reconcile's outcome, so its error wins (a conflict's Wait comes back
// shortly; anything else with backoff, joined with the reconcile's error
// unless that one was terminal, which would stop the retry).
func Written(res ctrl.Result, err, writeErr error) (ctrl.Result, error) {
	switch {
	case writeErr == nil:
		return res, err
	case IsWaiting(writeErr):
		return Result(writeErr, 0)
	case err != nil && !errors.Is(err, reconcile.TerminalError(nil)):
		return ctrl.Result{}, errors.Join(writeErr, err)
	}
	return ctrl.Result{}, writeErr
}

// Finish ends a reconcile whose status the caller has computed into
// in.Object: Compute sets the outcome's condition, records events and
// decides the result, then PatchStatus writes the status when it differs
// from before's, and Written combines the two.
func Finish(ctx context.Context, c client.Client, before client.Object, in Input, opts ...PatchOption) (ctrl.Result, error) {
	res, err := Compute(ctx, in)
	return Written(res, err, PatchStatus(ctx, c, before, in.Object, opts...))
}

func kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}
