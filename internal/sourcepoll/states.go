package sourcepoll

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/gitfleet/fleet/internal/sharding"
)

// States keeps a controller's in-memory state of each object, T, by name.
// The zero value is ready to use.
type States[T any] struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*T
}

// Get returns the state of the object key, a zero T the first time.
func (s *States[T]) Get(key types.NamespacedName) *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[types.NamespacedName]*T{}
	}
	st, ok := s.m[key]
	if !ok {
		st = new(T)
		s.m[key] = st
	}
	return st
}

// Forget drops the state of an object that is gone.
func (s *States[T]) Forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// Load reads the object of a reconcile, key, into obj and, unless it is
// being deleted, makes sure it holds finalizer. It returns false when the
// object is gone, or belongs to another shard than shard (this manager's,
// see internal/sharding), after forgetting its state.
func (s *States[T]) Load(ctx context.Context, c client.Client, key types.NamespacedName, obj client.Object, finalizer, shard string) (bool, error) {
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			s.Forget(key)
			return false, nil
		}
		return false, err
	}
	if !sharding.Owns(shard, obj) {
		s.Forget(key)
		return false, nil
	}
	if obj.GetDeletionTimestamp().IsZero() && controllerutil.AddFinalizer(obj, finalizer) {
		if err := c.Update(ctx, obj); err != nil {
			return false, err
		}
	}
	return true, nil
}
