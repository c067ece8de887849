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
	return k, k.store(ctx)
}

// Rotate makes a new current key and keeps the current one as the
// previous.
func (k *Keys) Rotate(ctx context.Context) error {
	next, err := sealing.NewKey()
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.previous, k.current = k.current, next
	k.mu.Unlock()
	return k.store(ctx)
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

func (k *Keys) store(ctx context.Context) error {
	k.mu.RLock()
	data := map[string][]byte{currentKey: sealing.EncodePrivateKey(k.current), clusterNamespaceKey: []byte(k.clusterNamespace)}
	if k.previous != nil {
		data[previousKey] = sealing.EncodePrivateKey(k.previous)
	}
	k.mu.RUnlock()
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
