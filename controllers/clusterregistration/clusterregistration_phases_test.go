package clusterregistration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/registration"
)

func TestValidate(t *testing.T) {
	key, err := registration.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	valid := func() *fleet.ClusterRegistration {
		return &fleet.ClusterRegistration{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fleet.RegistrationTokenLabel: "t"}},
			Spec:       fleet.ClusterRegistrationSpec{ClientID: "uid", ClientRandom: "0123456789abcdef", PublicKey: registration.EncodePublicKey(key)},
		}
	}
	cases := map[string]struct {
		mutate func(*fleet.ClusterRegistration)
		err    string
	}{
		"valid":          {func(*fleet.ClusterRegistration) {}, ""},
		"no client id":   {func(r *fleet.ClusterRegistration) { r.Spec.ClientID = "" }, "spec.clientID"},
		"short random":   {func(r *fleet.ClusterRegistration) { r.Spec.ClientRandom = "abc" }, "spec.clientRandom"},
		"no token label": {func(r *fleet.ClusterRegistration) { r.Labels = nil }, fleet.RegistrationTokenLabel},
		// An agent of an earlier version, which waits for a credential secret.
		"no public key":  {func(r *fleet.ClusterRegistration) { r.Spec.PublicKey = "" }, "spec.publicKey"},
		"bad public key": {func(r *fleet.ClusterRegistration) { r.Spec.PublicKey = "AAAA" }, "spec.publicKey"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := valid()
			tc.mutate(r)
			err := Validate(r)
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			}
		})
	}
}

func TestCheckTakeover(t *testing.T) {
	reg := &fleet.ClusterRegistration{Spec: fleet.ClusterRegistrationSpec{ClientID: "uid", ClientRandom: "0123456789abcdef"}}
	token := func(labels map[string]string, name string) *fleet.ClusterRegistrationToken {
		return &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	generic := token(nil, "t")
	cluster := func(checkedIn bool, renewal string) *fleet.Cluster {
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "edge"}, Spec: fleet.ClusterSpec{ClientID: "uid"}}
		if checkedIn {
			c.Status.Agent.LastSeen = metav1.Now()
		}
		c.Status.Agent.RenewalHash = renewal
		return c
	}
	// lease is an agent's check-in Lease, renewed, with a renewal proof.
	lease := func(proof string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now()}}}
		if proof != "" {
			l.Annotations = map[string]string{fleet.RenewalHashAnnotation: proof}
		}
		return l
	}
	cases := map[string]struct {
		token   *fleet.ClusterRegistrationToken
		cluster *fleet.Cluster
		refused bool
		lease   *coordinationv1.Lease
	}{
		"agent checked in by Lease only: a generic token may not": {generic, cluster(false, ""), true, lease("")},
		"agent checked in by Lease: the agent's own proof on it":  {generic, cluster(false, ""), false, lease(registration.RenewalHash(reg.Spec.ClientRandom))},
		"agent checked in by Lease: a proof of another on it":     {generic, cluster(true, ""), true, lease(registration.RenewalHash("another-random-nonce"))},
		"agent checked in by Lease: a token for the cluster":      {token(map[string]string{fleet.RegistrationTokenClusterLabel: "edge"}, "t"), cluster(false, ""), false, lease("")},
		"no agent yet: any token claims it":                       {generic, cluster(false, ""), false, nil},
		"agent checked in: a generic token may not":               {generic, cluster(true, ""), true, nil},
		"agent checked in: a token for the cluster":               {token(map[string]string{fleet.RegistrationTokenClusterLabel: "edge"}, "t"), cluster(true, ""), false, nil},
		"agent checked in: the import token":                      {token(nil, "import-token-edge"), cluster(true, ""), false, nil},
		"agent checked in: a token for another":                   {token(map[string]string{fleet.RegistrationTokenClusterLabel: "other"}, "t"), cluster(true, ""), true, nil},
		"a token for another, no agent yet":                       {token(map[string]string{fleet.RegistrationTokenClusterLabel: "other"}, "t"), cluster(false, ""), true, nil},
		"agent checked in: the agent's own proof":                 {generic, cluster(true, registration.RenewalHash(reg.Spec.ClientRandom)), false, nil},
		"agent checked in: a proof of another":                    {generic, cluster(true, registration.RenewalHash("another-random-nonce")), true, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := checkTakeover(reg, tc.token, tc.cluster, tc.lease)
			if !tc.refused {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonIdentityConflict))
		})
	}
}

// TestSupersedes checks which earlier registrations of an identity a grant
// replaces, creation times being whole seconds: an agent that registers
// again right after a grant (a new bootstrap placed at once) makes its second
// request in the same second as the first, whatever their random names.
func TestSupersedes(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.NewTime(time.Unix(1_800_000_000+sec, 0)) }
	reg := func(name string, sec int64, granted bool) *fleet.ClusterRegistration {
		r := &fleet.ClusterRegistration{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(sec)}}
		r.Status.Granted = granted
		return r
	}
	cases := []struct {
		name     string
		reg, old *fleet.ClusterRegistration
		want     bool
	}{
		{"made a second before", reg("request-1", 1, false), reg("request-f", 0, true), true},
		{"made a second before, not granted", reg("request-1", 1, false), reg("request-f", 0, false), true},
		{"made a second after", reg("request-f", 0, false), reg("request-1", 1, true), false},
		{"same second, granted already, its name after", reg("request-9969", 0, false), reg("request-e345", 0, true), true},
		{"same second, granted already, its name before", reg("request-e345", 0, false), reg("request-9969", 0, true), true},
		{"same second, neither granted", reg("request-e345", 0, false), reg("request-9969", 0, false), false},
		{"same second, neither granted, the other way", reg("request-9969", 0, false), reg("request-e345", 0, false), false},
	}
	for _, c := range cases {
		if got := supersedes(c.reg, c.old); got != c.want {
			t.Errorf("%s: supersedes = %v, want %v", c.name, got, c.want)
		}
	}

	// Two requests granted at once, each checking the other as its cache
	// shows it: whatever each sees (the other pending, or granted by a
	// status write made after the other's own check), they never delete each
	// other, so one of them keeps its credential.
	for _, secs := range [][2]int64{{0, 0}, {0, 1}, {1, 0}} {
		for _, aSeesBGranted := range []bool{false, true} {
			for _, bSeesAGranted := range []bool{false, true} {
				if aSeesBGranted && bSeesAGranted {
					continue // each grant is written after its own check: not both
				}
				a, b := reg("request-a", secs[0], false), reg("request-b", secs[1], false)
				bAsASees, aAsBSees := reg("request-b", secs[1], aSeesBGranted), reg("request-a", secs[0], bSeesAGranted)
				if supersedes(a, bAsASees) && supersedes(b, aAsBSees) {
					t.Errorf("created at %v, a sees b granted %v, b sees a granted %v: each deletes the other", secs, aSeesBGranted, bSeesAGranted)
				}
			}
		}
	}
}

// TestAbandonedFor checks which pending requests count as given up by their
// agent: one of the same identity and token was made a second or more
// after them.
func TestAbandonedFor(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.NewTime(time.Unix(1_800_000_000+sec, 0)) }
	reg := func(name, clientID, token string, sec int64) fleet.ClusterRegistration {
		return fleet.ClusterRegistration{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), CreationTimestamp: at(sec),
			Labels: map[string]string{fleet.RegistrationTokenLabel: token}}, Spec: fleet.ClusterRegistrationSpec{ClientID: clientID}}
	}
	first := reg("request-1", "edge-1", "token", 0)
	deleting := reg("request-4", "edge-1", "token", 9)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1_800_000_100, 0)}
	cases := []struct {
		name   string
		others []fleet.ClusterRegistration
		want   string
	}{
		{"alone", []fleet.ClusterRegistration{first}, ""},
		{"a newer one of its agent", []fleet.ClusterRegistration{first, reg("request-2", "edge-1", "token", 40)}, "request-2"},
		{"a newer one of another identity", []fleet.ClusterRegistration{first, reg("request-2", "edge-2", "token", 40)}, ""},
		{"a newer one with another token", []fleet.ClusterRegistration{first, reg("request-2", "edge-1", "other", 40)}, ""},
		{"one of the same second", []fleet.ClusterRegistration{first, reg("request-2", "edge-1", "token", 0)}, ""},
		{"an older one", []fleet.ClusterRegistration{reg("request-0", "edge-1", "token", -40), first}, ""},
		{"a newer one being deleted", []fleet.ClusterRegistration{first, deleting}, ""},
	}
	for _, c := range cases {
		if got := abandonedFor(&first, c.others); got != c.want {
			t.Errorf("%s: abandonedFor = %q, want %q", c.name, got, c.want)
		}
	}
}
