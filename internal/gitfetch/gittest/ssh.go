package gittest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHServer serves the repositories below a root over SSH on loopback, as
// git hosts do: a real SSH server (golang.org/x/crypto/ssh) that accepts one
// client key and runs git's own git-upload-pack for `git-upload-pack
// '<path>'` requests, so fetches speak the full protocol (shallow ones
// included). It needs the git binary; pushes are refused.
type SSHServer struct {
	// Addr is the server's host:port.
	Addr string
	// HostKey is the key the server proves its identity with.
	HostKey ssh.PublicKey

	root       string
	authorized []byte
	config     *ssh.ServerConfig
	listener   net.Listener
	wg         sync.WaitGroup
	uploads    atomic.Int64
	mu         sync.Mutex
	conns      map[net.Conn]bool
	closed     bool
}

// NewSSHServer starts a server for the repositories below root that lets in
// only the holder of the private key of authorized, under any user name.
// Its host key is made fresh: put KnownHostsLine in known_hosts to trust it.
func NewSSHServer(root string, authorized ssh.PublicKey) (*SSHServer, error) {
	if _, err := exec.LookPath("git-upload-pack"); err != nil {
		if _, err := exec.LookPath("git"); err != nil {
			return nil, fmt.Errorf("the SSH git server runs git-upload-pack: install git: %w", err)
		}
	}
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		return nil, err
	}
	s := &SSHServer{HostKey: signer.PublicKey(), root: root, authorized: authorized.Marshal(), conns: map[net.Conn]bool{}}
	s.config = &ssh.ServerConfig{
		PublicKeyCallback: func(c ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), s.authorized) {
				return nil, nil
			}
			return nil, fmt.Errorf("key %s of user %s is not authorized", ssh.FingerprintSHA256(key), c.User())
		},
	}
	s.config.AddHostKey(signer)
	s.listener, err = (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.Addr = s.listener.Addr().String()
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// RepoURL is the ssh:// URL of the repository ROOT/name.
func (s *SSHServer) RepoURL(name string) string {
	return "ssh://git@" + s.Addr + "/" + name
}

// KnownHostsLine is the known_hosts line that trusts this server's host key.
func (s *SSHServer) KnownHostsLine() string {
	return knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, s.HostKey)
}

// Fetches counts the git-upload-pack runs: connections whose host key the
// client refused, or that failed authentication, never get there.
func (s *SSHServer) Fetches() int64 {
	return s.uploads.Load()
}

// Close stops accepting, closes the open connections and waits for them.
func (s *SSHServer) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	_ = s.listener.Close()
	s.wg.Wait()
}

func (s *SSHServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.listener.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = nc.Close()
			return
		}
		s.conns[nc] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(nc)
			s.mu.Lock()
			delete(s.conns, nc)
			s.mu.Unlock()
		}()
	}
}

func (s *SSHServer) serveConn(nc net.Conn) {
	defer nc.Close()
	// A client that refuses the host key, or a key that is not authorized,
	// ends here.
	conn, chans, reqs, err := ssh.NewServerConn(nc, s.config)
	if err != nil {
		return
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	var sessions sync.WaitGroup
	for nch := range chans {
		if nch.ChannelType() != "session" {
			_ = nch.Reject(ssh.UnknownChannelType, "only sessions are served")
			continue
		}
		ch, chReqs, err := nch.Accept()
		if err != nil {
			continue
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			s.session(ch, chReqs)
		}()
	}
	sessions.Wait()
}

// session runs the one command a git client asks for.
func (s *SSHServer) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			// env, pty-req and the like: git needs none of them.
			_ = req.Reply(false, nil)
			continue
		}
		var payload struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, nil)
		status := s.run(ch, payload.Command)
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		return
	}
}

// run serves `git-upload-pack '<path>'` on the channel and returns the exit
// status.
func (s *SSHServer) run(ch ssh.Channel, command string) uint32 {
	service, arg, _ := strings.Cut(command, " ")
	if service != "git-upload-pack" {
		fmt.Fprintf(ch.Stderr(), "only git-upload-pack is served, not %q\n", service)
		return 1
	}
	name := strings.Trim(strings.Trim(arg, "'\""), "/")
	dir := filepath.Join(s.root, name)
	if !filepath.IsLocal(name) {
		dir = ""
	} else if _, err := os.Stat(dir); err != nil && strings.HasSuffix(name, ".git") {
		dir = filepath.Join(s.root, strings.TrimSuffix(name, ".git"))
	}
	if _, err := os.Stat(dir); dir == "" || err != nil {
		fmt.Fprintf(ch.Stderr(), "fatal: '%s' does not appear to be a git repository\n", name)
		return 128
	}
	s.uploads.Add(1)
	// The session ends the command (it ends with the channel), not a context.
	cmd := exec.CommandContext(context.Background(), "git", "upload-pack", dir) //nolint:gosec // G204: git itself, on a repository below root (name checked local above)
	cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "fatal: %v\n", err)
		return 1
	}
	// Copied apart from the command, so that a client keeping its side open
	// does not hold the exit status back; the copy ends when the channel
	// closes.
	go func() {
		_, _ = io.Copy(stdin, ch)
		_ = stdin.Close()
	}()
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return uint32(exit.ExitCode())
	default:
		return 1
	}
}
