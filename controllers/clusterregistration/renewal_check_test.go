package clusterregistration

import (
	"testing"
	"time"
)

func TestCheckRenewAfter(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		lifetime, renewAfter time.Duration
		ok                   bool
	}{
		{30 * day, 0, true},
		{30 * day, 15 * day, true},
		{30 * day, 19 * day, true},
		{30 * day, 20 * day, false},
		{30 * day, 25 * day, false},
		{30 * day, -time.Hour, false},
	} {
		err := CheckRenewAfter(tc.lifetime, tc.renewAfter)
		if (err == nil) != tc.ok {
			t.Errorf("CheckRenewAfter(%s, %s) = %v, want ok=%v", tc.lifetime, tc.renewAfter, err, tc.ok)
		}
	}
}
