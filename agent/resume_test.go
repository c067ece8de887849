package agent

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestResumingWatch: a watch from a known resourceVersion that cannot reach
// the API server is tried again, from the same resourceVersion, until it
// can; the API server's own refusal (410 Gone) and a first watch go back to
// the reflector at once.
func TestResumingWatch(t *testing.T) {
	unreachableErr := &url.Error{Op: "Get", URL: "https://manager", Err: errors.New("dial tcp: i/o timeout")}
	gone := apierrors.NewResourceExpired("too old resource version")
	for _, tc := range []struct {
		name      string
		rv        string
		errs      []error
		wantCalls int
		wantErr   error
	}{
		{name: "unreachable, then back", rv: "42", errs: []error{unreachableErr, unreachableErr, nil}, wantCalls: 3},
		{name: "gone: relist", rv: "42", errs: []error{gone}, wantCalls: 1, wantErr: gone},
		{name: "first watch not retried", rv: "", errs: []error{unreachableErr}, wantCalls: 1, wantErr: unreachableErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var rvs []string
			lw := &toolscache.ListWatch{
				ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, nil },
				WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
					rvs = append(rvs, o.ResourceVersion)
					err := tc.errs[len(rvs)-1]
					if err != nil {
						return nil, err
					}
					return watch.NewFake(), nil
				},
			}
			r := &resumingListerWatcher{inner: toolscache.ToListerWatcherWithContext(lw), min: time.Millisecond, max: 10 * time.Millisecond}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w, err := r.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: tc.rv})
			g.Expect(rvs).To(HaveLen(tc.wantCalls))
			for _, rv := range rvs {
				g.Expect(rv).To(Equal(tc.rv))
			}
			if tc.wantErr != nil {
				g.Expect(err).To(MatchError(tc.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(w).NotTo(BeNil())
		})
	}
}
