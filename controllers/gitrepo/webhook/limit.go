package webhook

import (
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// sourceLimits keeps one token bucket per remote IP address. Buckets unused
// for a while are dropped, so that many sources cannot grow it without
// bound.
type sourceLimits struct {
	mu      sync.Mutex
	rate    rate.Limit
	burst   int
	buckets map[string]*sourceBucket
	swept   time.Time
}

type sourceBucket struct {
	limiter *rate.Limiter
	seen    time.Time
}

// sourceIdle is how long an unused bucket is kept; by then it is full again.
const sourceIdle = 5 * time.Minute

func newSourceLimits(r rate.Limit, burst int) *sourceLimits {
	return &sourceLimits{rate: r, burst: burst, buckets: map[string]*sourceBucket{}, swept: time.Now()}
}

// allow takes a token from the bucket of remoteAddr's IP address.
func (l *sourceLimits) allow(remoteAddr string) bool {
	ip := remoteAddr
	if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
		ip = host
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > sourceIdle {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > sourceIdle {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b := l.buckets[ip]
	if b == nil {
		b = &sourceBucket{limiter: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[ip] = b
	}
	b.seen = now
	return b.limiter.AllowN(now, 1)
}
