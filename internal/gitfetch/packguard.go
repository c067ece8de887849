package gitfetch

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// guardedStorage is the cache's object store for one fetch: the pack the
// remote sends goes through a packGuard before go-git indexes it, whatever
// the transport (HTTP, SSH, in process).
type guardedStorage struct {
	*filesystem.Storage
	ctx    context.Context //nolint:containedctx // storer.PackfileWriter takes no context; it is the fetch's, for the guard
	limits Limits
}

// PackfileWriter implements storer.PackfileWriter.
func (s *guardedStorage) PackfileWriter() (io.WriteCloser, error) {
	w, err := s.Storage.PackfileWriter()
	if err != nil {
		return nil, err
	}
	return newPackGuard(s.ctx, s.limits, w), nil
}

var _ storer.PackfileWriter = (*guardedStorage)(nil)

// hashCap bounds how much of an object already refused is inflated, to
// find its hash and so the file it is: beyond, the error names no file.
const hashCap = 1 << 30

// maxNamedEntries bounds the directory entries remembered to name files.
const maxNamedEntries = 200_000

// packGuard checks a pack as it streams, before the store sees it: the
// object count in its header, the size each object header declares and the
// size it inflates to, their sum, and the bytes received. Bytes go on to the
// store only once the guard has read them, so go-git never starts inflating
// an object the guard refuses. It runs the checks in a goroutine reading the
// bytes Write hands it through a pipe.
type packGuard struct {
	ctx      context.Context //nolint:containedctx // an io.Writer: Write takes no context
	limits   Limits
	next     io.WriteCloser
	pw       *io.PipeWriter
	received int64

	done   chan struct{}
	result error
	once   sync.Once
}

func newPackGuard(ctx context.Context, limits Limits, next io.WriteCloser) *packGuard {
	pr, pw := io.Pipe()
	g := &packGuard{ctx: ctx, limits: limits, next: next, pw: pw, done: make(chan struct{})}
	go func() {
		in := &consumeReader{src: pr, out: next, buf: make([]byte, 64<<10)}
		err := (&packInspector{limits: limits, in: in, parents: map[plumbing.Hash]treeEntry{}}).run()
		if err == nil {
			err = in.forwardRest()
		}
		g.result = err
		_ = pr.CloseWithError(orEOF(err))
		close(g.done)
	}()
	return g
}

func orEOF(err error) error {
	if err == nil {
		return io.EOF
	}
	return err
}

// Write hands p to the inspector, and returns once it has read all of it.
func (g *packGuard) Write(p []byte) (int, error) {
	if err := g.ctx.Err(); err != nil {
		return 0, g.stop(err)
	}
	g.received += int64(len(p))
	if g.received > g.limits.PackBytes {
		return 0, g.stop(overLimit(limitPackBytes, g.limits.PackBytes, g.received, ""))
	}
	n, err := g.pw.Write(p)
	if err != nil {
		return n, g.stop(err)
	}
	return n, nil
}

// stop ends the inspection with err, and returns the inspector's own error
// when it found a limit first.
func (g *packGuard) stop(err error) error {
	g.once.Do(func() { _ = g.pw.CloseWithError(err) })
	<-g.done
	var le *LimitError
	if errors.As(g.result, &le) {
		return g.result
	}
	return err
}

// Close waits for the inspector and closes the store's writer.
func (g *packGuard) Close() error {
	g.once.Do(func() { _ = g.pw.Close() })
	<-g.done
	err := g.next.Close()
	if g.result != nil {
		return g.result
	}
	return err
}

// consumeReader reads src through a buffer and hands out to out only the
// bytes its reader has consumed, each time it refills.
type consumeReader struct {
	src     io.Reader
	out     io.Writer
	buf     []byte
	r, w    int // buf[r:w] is unread
	sent    int // buf[sent:r] is consumed, not yet handed on
	held    bool
	started bool
}

func (c *consumeReader) flush() error {
	if !c.held && c.r > c.sent {
		if _, err := c.out.Write(c.buf[c.sent:c.r]); err != nil {
			return err
		}
	}
	c.sent = c.r
	return nil
}

func (c *consumeReader) fill() error {
	if err := c.flush(); err != nil {
		return err
	}
	c.r, c.w, c.sent = 0, 0, 0
	for c.w == 0 {
		n, err := c.src.Read(c.buf)
		c.w = n
		if n == 0 && err != nil {
			return err
		}
	}
	c.started = true
	return nil
}

// ReadByte implements io.ByteReader, so that zlib reads no further than the
// end of each object.
func (c *consumeReader) ReadByte() (byte, error) {
	if c.r == c.w {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	b := c.buf[c.r]
	c.r++
	return b, nil
}

func (c *consumeReader) Read(p []byte) (int, error) {
	if c.r == c.w {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.buf[c.r:c.w])
	c.r += n
	return n, nil
}

// forwardRest hands on the rest of the stream (the pack's checksum).
func (c *consumeReader) forwardRest() error {
	for {
		c.r = c.w
		err := c.fill()
		if errors.Is(err, io.EOF) {
			c.r = c.w
			return c.flush()
		}
		if err != nil {
			return err
		}
	}
}

// treeEntry is where an object appears: in directory parent, as name.
type treeEntry struct {
	parent plumbing.Hash
	name   string
}

// packInspector reads a pack object by object. It remembers the entries of
// the directories it sees (which come before their files in a pack), so that
// a refused file can be named.
type packInspector struct {
	limits  Limits
	in      *consumeReader
	total   int64
	parents map[plumbing.Hash]treeEntry
	zr      io.ReadCloser
	// refused is the hash of the file refused, once known, and budget what
	// may still be inflated to name it.
	refused plumbing.Hash
	budget  int64
}

const (
	objCommit   = 1
	objTree     = 2
	objBlob     = 3
	objTag      = 4
	objOfsDelta = 6
	objRefDelta = 7
)

func (p *packInspector) run() error {
	var hdr [12]byte
	if _, err := io.ReadFull(p.in, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) && !p.in.started {
			return nil // nothing sent: go-git reports the empty pack
		}
		return fmt.Errorf("reading the pack header: %w", err)
	}
	if !bytes.Equal(hdr[:4], []byte("PACK")) {
		return errors.New("the remote sent something other than a git pack")
	}
	count := int64(binary.BigEndian.Uint32(hdr[8:]))
	if count > p.limits.Objects {
		return overLimit(limitObjects, p.limits.Objects, count, "")
	}
	for i := range count {
		if err := p.object(); err != nil {
			var le *LimitError
			if errors.As(err, &le) && !p.refused.IsZero() {
				le.Path = p.name(count - i - 1)
			}
			return err
		}
	}
	return nil
}

// name reads the objects left in the pack, handing none on, for the
// directories that say where the refused object is (a pack may send them
// after their files), inflating at most what is left of hashCap.
func (p *packInspector) name(left int64) string {
	for ; left > 0; left-- {
		typ, sz, err := p.header()
		if err != nil || sz > p.budget {
			break
		}
		p.budget -= sz
		if err := p.openData(); err != nil {
			break
		}
		if typ == objTree && sz <= p.limits.FileBytes {
			err = p.tree(sz)
		} else {
			n, cerr := io.CopyN(io.Discard, p.zr, sz+1)
			err = p.end(n, sz, cerr)
		}
		if err != nil {
			break
		}
	}
	return p.pathOf(p.refused)
}

// object reads one object: its header, then its data, inflated and thrown
// away (directories are parsed for their entries).
func (p *packInspector) object() error {
	typ, sz, err := p.header()
	if err != nil {
		return err
	}
	if sz > p.limits.FileBytes {
		return p.refuse(typ, sz)
	}
	if err := p.openData(); err != nil {
		return err
	}
	switch typ {
	case objOfsDelta, objRefDelta:
		return p.delta(sz)
	case objTree:
		if err := p.count(sz, ""); err != nil {
			return err
		}
		return p.tree(sz)
	case objCommit, objBlob, objTag:
		if err := p.count(sz, ""); err != nil {
			return err
		}
		return p.discard(sz)
	}
	return fmt.Errorf("the pack holds an object of unknown type %d", typ)
}

// header reads an object's type and size, and the base a delta names.
func (p *packInspector) header() (int, int64, error) {
	b, err := p.in.ReadByte()
	if err != nil {
		return 0, 0, unexpected(err)
	}
	typ, sz := int(b>>4&7), int64(b&15)
	for shift := 4; b&0x80 != 0; shift += 7 {
		if shift > 56 {
			return 0, 0, errors.New("the pack holds an object header too long")
		}
		if b, err = p.in.ReadByte(); err != nil {
			return 0, 0, unexpected(err)
		}
		sz |= int64(b&0x7f) << shift
	}
	switch typ {
	case objOfsDelta:
		for i := 0; ; i++ {
			if b, err = p.in.ReadByte(); err != nil {
				return 0, 0, unexpected(err)
			}
			if b&0x80 == 0 {
				break
			}
			if i > 9 {
				return 0, 0, errors.New("the pack holds a delta offset too long")
			}
		}
	case objRefDelta:
		var base [20]byte
		if _, err := io.ReadFull(p.in, base[:]); err != nil {
			return 0, 0, unexpected(err)
		}
	}
	return typ, sz, nil
}

func (p *packInspector) openData() error {
	var err error
	if p.zr == nil {
		p.zr, err = zlib.NewReader(p.in)
	} else {
		err = p.zr.(zlib.Resetter).Reset(p.in, nil)
	}
	return unexpected(err)
}

// count adds an object's inflated size to the total.
func (p *packInspector) count(sz int64, path string) error {
	p.total += sz
	if p.total > p.limits.CommitBytes {
		return overLimit(limitCommitBytes, p.limits.CommitBytes, p.total, path)
	}
	return nil
}

// discard inflates the object's data, which must be sz bytes.
func (p *packInspector) discard(sz int64) error {
	n, err := io.CopyN(io.Discard, p.zr, sz+1)
	return p.end(n, sz, err)
}

// end checks that an object inflated to its declared size and that its
// compressed stream ended there.
func (p *packInspector) end(n, sz int64, err error) error {
	if err != nil && !errors.Is(err, io.EOF) {
		return unexpected(err)
	}
	if n != sz {
		return fmt.Errorf("the pack holds an object of %d bytes that its header says is %d", n, sz)
	}
	return nil
}

// delta reads the sizes at the start of a delta: the object it makes must
// be within limits too.
func (p *packInspector) delta(sz int64) error {
	counted := &countingReader{r: io.LimitReader(p.zr, sz)}
	br := bufio.NewReaderSize(counted, 64)
	if _, err := binary.ReadUvarint(br); err != nil { // the base's size
		return fmt.Errorf("the pack holds a malformed delta: %w", unexpected(err))
	}
	target, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("the pack holds a malformed delta: %w", unexpected(err))
	}
	if target > uint64(p.limits.FileBytes) {
		return overLimit(limitFileBytes, p.limits.FileBytes, int64(min(target, 1<<62)), "")
	}
	if err := p.count(int64(target), ""); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return unexpected(err)
	}
	extra, err := io.CopyN(io.Discard, p.zr, 1)
	return p.end(counted.n+extra, sz, err)
}

// tree parses a directory's entries, remembering where each object is.
func (p *packInspector) tree(sz int64) error {
	h := plumbing.NewHasher(plumbing.TreeObject, sz)
	counted := &countingReader{r: io.TeeReader(io.LimitReader(p.zr, sz), h)}
	br := bufio.NewReader(counted)
	var entries []treeEntry
	var hashes []plumbing.Hash
	for {
		if _, err := br.ReadString(' '); err != nil { // the mode
			if errors.Is(err, io.EOF) {
				break
			}
			return unexpected(err)
		}
		name, err := br.ReadString(0)
		if err != nil {
			return unexpected(err)
		}
		var oid plumbing.Hash
		if _, err := io.ReadFull(br, oid[:]); err != nil {
			return unexpected(err)
		}
		entries = append(entries, treeEntry{name: name[:len(name)-1]})
		hashes = append(hashes, oid)
	}
	extra, err := io.CopyN(io.Discard, p.zr, 1)
	if err := p.end(counted.n+extra, sz, err); err != nil {
		return err
	}
	self := h.Sum()
	for i, e := range entries {
		if len(p.parents) >= maxNamedEntries {
			break
		}
		if _, seen := p.parents[hashes[i]]; !seen {
			p.parents[hashes[i]] = treeEntry{parent: self, name: e.name}
		}
	}
	return nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// refuse returns the error for an object whose header declares sz bytes.
// A file's data is inflated into a hash (not kept, not handed to the store)
// to find which object it is, so that run can name it.
func (p *packInspector) refuse(typ int, sz int64) error {
	if typ == objBlob && sz <= hashCap {
		p.in.held = true
		if err := p.openData(); err == nil {
			h := plumbing.NewHasher(plumbing.BlobObject, sz)
			if n, err := io.CopyN(h, p.zr, sz); err == nil && n == sz {
				if _, err := io.CopyN(io.Discard, p.zr, 1); errors.Is(err, io.EOF) {
					p.refused, p.budget = h.Sum(), hashCap-sz
				}
			}
		}
	}
	return overLimit(limitFileBytes, p.limits.FileBytes, sz, "")
}

// pathOf is the path of an object in the directories read so far, "" when
// unknown.
func (p *packInspector) pathOf(h plumbing.Hash) string {
	path := ""
	for range p.limits.PathDepth + 2 {
		e, ok := p.parents[h]
		if !ok {
			return path
		}
		if path == "" {
			path = e.name
		} else {
			path = e.name + "/" + path
		}
		h = e.parent
	}
	return path
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
