package upstream

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/internal/registration"
)

// Following the manager's address. The manager tells a registering agent
// the URL and CA agents reach it at in the credential it seals to it (kept
// in the fleet-agent Secret), and publishes them in the ConfigMap
// fleet-manager-address of the agent's cluster namespace
// (controllers/manageraddress) when they change after that, or when the
// agent registered before this was sealed with it. The ConfigMap, when
// there is one, is what the agent follows; otherwise the address told. When they differ from the
// credential's, the agent tries its credential there: the same API server
// behind another name accepts the same token. Only then does it store the
// new address and switch to it, so a published address that does not work
// from this cluster (a name only the manager's network resolves, a wrong CA)
// costs the agent nothing: it stays where it is and looks again later.

// Published reads the address the manager publishes for cred's cluster
// namespace; ok is false when it publishes none.
func Published(ctx context.Context, cred *Credential) (url string, ca []byte, ok bool, err error) {
	c, err := NewClient(cred.RESTConfig())
	if err != nil {
		return "", nil, false, err
	}
	cm := &corev1.ConfigMap{}
	key := types.NamespacedName{Namespace: cred.ClusterNamespace, Name: registration.AddressConfigMap}
	// From the API server's watch cache: thousands of agents look now and
	// then, and a moment's staleness does not matter.
	err = c.Get(ctx, key, cm, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}})
	if apierrors.IsNotFound(err) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("reading the manager's published address %s: %w", key, err)
	}
	url = cm.Data[registration.AddressURLKey]
	return url, []byte(cm.Data[registration.AddressCAKey]), url != "", nil
}

// Follow moves cred to the address the manager publishes when that differs
// from cred's and the manager accepts cred there: it stores the credential
// with the new address in the fleet-agent Secret and returns true. The
// caller then starts its clients again from the stored credential. It
// returns false, with the reason, when the address stays.
// The fleet-agent Secret is the one of namespace in the agent's own cluster
// (local).
func Follow(ctx context.Context, local client.Client, namespace string, cred *Credential) (bool, error) {
	url, ca, ok, err := Published(ctx, cred)
	if err != nil {
		return false, err
	}
	if !ok {
		// Nothing published since the grant: the address told with it.
		if cred.PublishedURL == "" {
			return false, nil
		}
		url, ca = cred.PublishedURL, cred.PublishedCA
	}
	next, err := followTo(ctx, local, namespace, cred, url, ca)
	return next != nil, err
}

// followTo moves cred to url and ca when they differ from cred's and the
// manager accepts cred there: it stores and returns the moved credential
// (nil when the address stays).
func followTo(ctx context.Context, local client.Client, namespace string, cred *Credential, url string, ca []byte) (*Credential, error) {
	// A manager that publishes no CA says nothing about it (its
	// certificate may be publicly trusted, or it was started without
	// --api-server-ca-file): the CA the agent has is tried first.
	cas := [][]byte{ca}
	if len(ca) == 0 {
		cas = [][]byte{cred.APIServerCA, nil}
	}
	if sameURL(url, cred.APIServerURL) && bytes.Equal(cas[0], cred.APIServerCA) {
		return nil, nil
	}
	next := *cred
	next.Token, next.current = cred.CurrentToken(), nil
	next.APIServerURL = url
	var err error
	for i, ca := range cas {
		next.APIServerCA = ca
		if err = Check(ctx, &next); err == nil {
			break
		}
		if i == len(cas)-1 {
			return nil, fmt.Errorf("the manager publishes the address %s, and the agent's credential does not work there (%w): staying at %s",
				url, err, cred.APIServerURL)
		}
	}
	if err := Store(ctx, local, namespace, &next); err != nil {
		return nil, err
	}
	ctrl.LoggerFrom(ctx).Info("The manager moved: following it to its published address", "from", cred.APIServerURL, "to", url)
	return &next, nil
}

// sameURL compares two URLs of an API server, a trailing slash aside.
func sameURL(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}
