package content

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

var resources = []fleet.BundleResource{
	{Name: "a.yaml", Content: "kind: ConfigMap\n"},
	{Name: "chart/values.yaml", Content: "H4sI", Encoding: "base64+gz"},
}

func TestRoundTrip(t *testing.T) {
	g := NewWithT(t)
	name, build, err := Encode(resources)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := build()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Name).To(Equal(name))
	g.Expect(name).To(HavePrefix("s-"))
	g.Expect(c.Labels).To(HaveKeyWithValue(fleet.ManagedLabel, "true"))

	got, err := Decode(c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(resources))

	again, _, err := Encode(resources)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(name), "the same resources share one Content")
	other, _, err := Encode(resources[:1])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other).NotTo(Equal(name))
}

func TestDecodeRejects(t *testing.T) {
	_, build, err := Encode(resources)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cases := []struct {
		name   string
		change func(c *fleet.Content)
		limit  int
		err    string
	}{
		{name: "a corrupt sum", change: func(c *fleet.Content) { c.SHA256Sum = strings.Repeat("0", 64) }, limit: MaxSize, err: "is corrupt"},
		{name: "not gzip", change: func(c *fleet.Content) { c.Content = []byte("{}") }, limit: MaxSize, err: "is not gzip"},
		{name: "truncated", change: func(c *fleet.Content) { c.Content = c.Content[:len(c.Content)-4] }, limit: MaxSize, err: "content s-"},
		{name: "oversize", change: func(*fleet.Content) {}, limit: 16, err: "is larger than 16 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c, err := build()
			g.Expect(err).NotTo(HaveOccurred())
			tc.change(c)
			_, err = decode(c, tc.limit)
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
		})
	}
}

// Compress reuses its gzip writers: whatever it compressed before, on any
// goroutine, its output is the bytes a new gzip writer gives, so that a
// Content and an OCI artifact keep their digest across versions.
func TestCompressIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	fresh := func(raw []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(raw)
		_ = zw.Close()
		return buf.Bytes()
	}
	inputs := [][]byte{nil, []byte("kind: ConfigMap\n"), bytes.Repeat([]byte("0123456789abcdef"), 70000), []byte(strings.Repeat("x", 300))}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for range 4 {
		wg.Go(func() {
			for range 5 {
				for _, raw := range inputs {
					got, err := Compress(raw)
					if err != nil || !bytes.Equal(got, fresh(raw)) {
						errs <- fmt.Sprintf("input of %d bytes: err %v, %d bytes out, want %d", len(raw), err, len(got), len(fresh(raw)))
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// And it still reads back.
	zr, err := gzip.NewReader(bytes.NewReader(must(Compress(inputs[2]))))
	g.Expect(err).NotTo(HaveOccurred())
	back, err := io.ReadAll(zr)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(Equal(inputs[2]))
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
