// Package sealkey keeps the agent's sealing key pair (internal/sealing):
// the private keys in a Secret of the agent's own namespace downstream,
// never sent anywhere, the public key published on the check-in Lease by
// the Heartbeat. The key is made at the first start, made anew when the
// agent registers into another cluster namespace, and rotated with the
// credential; the previous key is kept so that what was sealed to it still
// opens until the manager has sealed it again to the new one.
package sealkey

import (
	"context"
	"crypto/ecdh"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/internal/sealing"
)

// SecretName names the Secret of the agent's namespace holding its keys.
const SecretName = "fleet-agent-sealing"

// Keys of that Secret.
const (
	currentKey          = "current"
	previousKey         = "previous"
	clusterNamespaceKey = "clusterNamespace"
)

// Keys are the agent's sealing keys.
type Keys struct {
	local            client.Client
	namespace        string
	clusterNamespace string

	mu                sync.RWMutex
	current, previous *ecdh.PrivateKey
}

// Load reads the keys from the agent's namespace, making and storing a new
// one when there is none, or when they were made for another cluster
// namespace (a new registration).
func Load(ctx context.Context, local client.Client, namespace, clusterNamespace string) (*Keys, error) {
	k := &Keys{local: local, namespace: namespace, clusterNamespace: clusterNamespace}
	s := &corev1.Secret{}
	err := local.Get(ctx, types.NamespacedName{Namespace: namespace, Name: SecretName}, s)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading the sealing key: %w", err)
	}
	if err == nil && string(s.Data[clusterNamespaceKey]) == clusterNamespace {
		if k.current, err = sealing.ParsePrivateKey(s.Data[currentKey]); err == nil {
			if p := s.Data[previousKey]; len(p) > 0 {
				k.previous, _ = sealing.ParsePrivateKey(p)
			}
			return k, nil
		}
	}
	if k.current, err = sealing.NewKey(); err != nil {
		return nil, err
	}
	err = k.store(ctx, k.current, nil)
	return k, err
}

// Rotate makes a new current key and keeps the current one as the
// previous.
func (k *Keys) Rotate(ctx context.Context) error {
	next, err := sealing.NewKey()
	if err != nil {
		return err
	}
	// Stored before it is used: a key published but lost at a restart
	// would leave the seals made to it unopenable.
	k.mu.RLock()
	current := k.current
	k.mu.RUnlock()
	if err := k.store(ctx, next, current); err != nil {
		return err
	}
	k.mu.Lock()
	k.previous, k.current = current, next
	k.mu.Unlock()
	return nil
}

// Private are the keys that open a seal, the current one first.
func (k *Keys) Private() []*ecdh.PrivateKey {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return []*ecdh.PrivateKey{k.current, k.previous}
}

// PublicKey is the current public key as the Lease carries it.
func (k *Keys) PublicKey() string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return sealing.EncodePublicKey(k.current.PublicKey())
}

// store writes current and previous (which may be nil) to the agent's
// Secret.
func (k *Keys) store(ctx context.Context, current, previous *ecdh.PrivateKey) error {
	data := map[string][]byte{currentKey: sealing.EncodePrivateKey(current), clusterNamespaceKey: []byte(k.clusterNamespace)}
	if previous != nil {
		data[previousKey] = sealing.EncodePrivateKey(previous)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: SecretName},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	err := k.local.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		existing := &corev1.Secret{}
		if err := k.local.Get(ctx, client.ObjectKeyFromObject(s), existing); err != nil {
			return err
		}
		existing.Data = data
		err = k.local.Update(ctx, existing)
	}
	if err != nil {
		return fmt.Errorf("storing the sealing key in %s/%s: %w", k.namespace, SecretName, err)
	}
	return nil
}
