package agentinstall

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// TokenOptions describe a registration token to create.
type TokenOptions struct {
	// Namespace is the workspace clusters register into.
	Namespace string
	// Name of the token; empty gives a generated "token-xxxxx".
	Name string
	// TTL is the token's lifetime; 0 means it never expires.
	TTL time.Duration
	// Cluster, when set, binds the token to that one Cluster of Namespace:
	// it registers that Cluster only, and may register it again after its
	// agent has checked in (an agent that lost its credential). Unset, the
	// token registers new clusters, and Clusters no agent checked in to yet.
	Cluster string
	// Wait bounds the wait for the manager to issue the token (default 1m).
	Wait time.Duration
}

// CreateToken creates a ClusterRegistrationToken on the manager's cluster and
// waits for the manager to issue its values.
func CreateToken(ctx context.Context, c client.Client, o TokenOptions) (*fleet.ClusterRegistrationToken, *Bootstrap, error) {
	token := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name}}
	if o.Name == "" {
		token.GenerateName = "token-"
	}
	if o.Cluster != "" {
		token.Labels = map[string]string{fleet.RegistrationTokenClusterLabel: o.Cluster}
	}
	if o.TTL > 0 {
		token.Spec.TTL = &metav1.Duration{Duration: o.TTL}
	}
	if err := c.Create(ctx, token); err != nil {
		return nil, nil, fmt.Errorf("creating a registration token in namespace %s: %w", o.Namespace, err)
	}
	boot, err := WaitForToken(ctx, c, token, o.Wait)
	return token, boot, err
}

// WaitForToken waits until the manager has written the token's values. The
// manager passes a reader that reads Secrets uncached: its cache holds none
// of the token's namespace.
func WaitForToken(ctx context.Context, c client.Reader, token *fleet.ClusterRegistrationToken, timeout time.Duration) (*Bootstrap, error) {
	if timeout == 0 {
		timeout = time.Minute
	}
	var boot *Bootstrap
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(token), token); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if token.Status.SecretName == "" {
			return false, nil
		}
		secret := &corev1.Secret{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: token.Namespace, Name: token.Status.SecretName}, secret); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		var err error
		boot, err = TokenValues(secret)
		return true, err
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the manager to issue token %s/%s (is fleet-manager running?): %w", token.Namespace, token.Name, err)
	}
	return boot, nil
}

// TokenValues reads the values the manager issued for a registration token
// from the token's values Secret.
func TokenValues(secret *corev1.Secret) (*Bootstrap, error) {
	boot := &Bootstrap{}
	if err := yaml.Unmarshal(secret.Data[fleet.RegistrationTokenSecretValuesKey], boot); err != nil {
		return nil, fmt.Errorf("the values of Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return boot, nil
}
