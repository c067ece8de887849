package upstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Keys of the downstream fleet-agent Secret that stores the credential.
const (
	APIServerURLKey     = "apiServerURL"
	APIServerCAKey      = "apiServerCA"
	TokenKey            = "token"
	ClusterNameKey      = "clusterName"
	ClusterNamespaceKey = "clusterNamespace"
	NamespaceKey        = "namespace"
	ClientIDKey         = "clientID"
	// PublishedURLKey and PublishedCAKey hold the address the manager told
	// the agent with its grant (absent when it told none).
	PublishedURLKey = "publishedAPIServerURL"
	PublishedCAKey  = "publishedAPIServerCA"
)

// Credential is what a registered agent uses to talk to the manager.
type Credential struct {
	APIServerURL string
	APIServerCA  []byte
	Token        string
	// ClusterName and Namespace name the agent's Cluster upstream.
	ClusterName string
	Namespace   string
	// ClusterNamespace holds the agent's BundleDeployments.
	ClusterNamespace string
	ClientID         string

	// current, set by NewRotator, is the token in use since the last
	// rotation; Token is then the one the credential started with.
	current *currentToken
	// PublishedURL and PublishedCA are the address the manager said, with
	// the grant, that agents reach it at: followed like the one it publishes
	// in the cluster namespace (Follow), which it writes only once the
	// address changes.
	PublishedURL string
	PublishedCA  []byte
	// TLSMode is how the manager's API server is trusted (WithTLSMode);
	// read from the agent ConfigMap, not stored with the credential.
	TLSMode string
}

// RESTConfig builds a client config for the manager's API server. Once a
// Rotator rotates the credential, requests of the configs it built carry the
// new token.
func (c *Credential) RESTConfig() *rest.Config {
	if c.current == nil {
		return WithTLSMode(Config(c.APIServerURL, c.APIServerCA, c.Token), c.TLSMode)
	}
	cfg := Config(c.APIServerURL, c.APIServerCA, "")
	cfg.WrapTransport = c.current.wrap
	return WithTLSMode(cfg, c.TLSMode)
}

// CurrentToken is the token in use: the latest rotated one, if any.
func (c *Credential) CurrentToken() string {
	if c.current == nil {
		return c.Token
	}
	return c.current.get()
}

// Config is a client config of the manager's API server at url, trusting
// ca, with token: the agent's, or a registration token's.
func Config(url string, ca []byte, token string) *rest.Config {
	return &rest.Config{
		Host:            url,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		Timeout:         30 * time.Second,
		UserAgent:       "fleet-agent",
	}
}

// ErrRejected marks a credential the manager refuses (Unauthorized or Forbidden).
var ErrRejected = errors.New("rejected by the manager")

// Check tells whether the manager accepts a credential: it lists the agent's
// BundleDeployments, which both authenticates and authorizes.
func Check(ctx context.Context, cred *Credential) error {
	c, err := NewClient(cred.RESTConfig())
	if err != nil {
		return err
	}
	list := &fleet.BundleDeploymentList{}
	return rejected(c.List(ctx, list, client.InNamespace(cred.ClusterNamespace), client.Limit(1)))
}

// rejected marks an Unauthorized or Forbidden error with ErrRejected.
func rejected(err error) error {
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return fmt.Errorf("%w: %v", ErrRejected, err)
	}
	return err
}

// LoadStored reads the fleet-agent Secret of namespace in the agent's own
// cluster; nil when there is none.
func LoadStored(ctx context.Context, local client.Client, namespace string) (*Credential, error) {
	secret := &corev1.Secret{}
	err := local.Get(ctx, types.NamespacedName{Namespace: namespace, Name: fleet.AgentName}, secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d := secret.Data
	cred := &Credential{
		APIServerURL:     string(d[APIServerURLKey]),
		APIServerCA:      d[APIServerCAKey],
		Token:            string(d[TokenKey]),
		ClusterName:      string(d[ClusterNameKey]),
		ClusterNamespace: string(d[ClusterNamespaceKey]),
		Namespace:        string(d[NamespaceKey]),
		ClientID:         string(d[ClientIDKey]),
		PublishedURL:     string(d[PublishedURLKey]),
		PublishedCA:      d[PublishedCAKey],
	}
	if cred.APIServerURL == "" || cred.Token == "" || cred.ClusterNamespace == "" {
		return nil, nil
	}
	return cred, nil
}

// Store writes cred, with the token in use, into the fleet-agent Secret of
// namespace in the agent's own cluster, creating it when there is none.
func Store(ctx context.Context, local client.Client, namespace string, cred *Credential) error {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fleet.AgentName, Labels: map[string]string{agentinstall.ManagedByLabel: "fleet"}},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			APIServerURLKey:     []byte(cred.APIServerURL),
			APIServerCAKey:      cred.APIServerCA,
			TokenKey:            []byte(cred.CurrentToken()),
			ClusterNameKey:      []byte(cred.ClusterName),
			ClusterNamespaceKey: []byte(cred.ClusterNamespace),
			NamespaceKey:        []byte(cred.Namespace),
			ClientIDKey:         []byte(cred.ClientID),
		},
	}
	if cred.PublishedURL != "" {
		secret.Data[PublishedURLKey], secret.Data[PublishedCAKey] = []byte(cred.PublishedURL), cred.PublishedCA
	}
	err := local.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		existing := &corev1.Secret{}
		if err := local.Get(ctx, client.ObjectKeyFromObject(secret), existing); err != nil {
			return err
		}
		existing.Data = secret.Data
		err = local.Update(ctx, existing)
	}
	if err != nil {
		return fmt.Errorf("storing the credential in %s/%s: %w", namespace, fleet.AgentName, err)
	}
	return nil
}
