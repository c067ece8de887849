package framework

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
)

// Proxy forwards TCP connections from a loopback port to a target address,
// and can cut them all, as a network partition between a cluster and the
// manager would. It forwards bytes only: TLS stays end to end, and a
// certificate valid for 127.0.0.1 stays valid through it.
type Proxy struct {
	// URL is the target URL with the proxy's address as host.
	URL string

	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	// up and down count the bytes forwarded to and from the target.
	up, down atomic.Int64
}

// Bytes returns the bytes forwarded so far to the target (up) and back from
// it (down), TLS records included: what the link carried.
func (p *Proxy) Bytes() (up, down int64) { return p.up.Load(), p.down.Load() }

// countingWriter adds what it writes to n.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// NewProxy listens on a free loopback port and forwards to the host of
// targetURL (an API server URL such as https://127.0.0.1:6443).
func NewProxy(targetURL string) (*Proxy, error) {
	u, err := url.Parse(targetURL)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	u.Host = ln.Addr().String()
	p.URL = u.String()
	go p.serve()
	return p, nil
}

func (p *Proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			_ = in.Close() // cut off: the connection is refused at once
			continue
		}
		go p.forward(in)
	}
}

func (p *Proxy) forward(in net.Conn) {
	defer p.forget(in)
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(out) {
		_ = out.Close()
		return
	}
	defer p.forget(out)
	done := make(chan struct{}, 2)
	pipe := func(dst io.Writer, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(countingWriter{out, &p.up}, in)
	go pipe(countingWriter{in, &p.down}, out)
	<-done // either side ending ends both
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	p.Cut()
	return p.ln.Close()
}
