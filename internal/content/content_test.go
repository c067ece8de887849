package content

import (
	"strings"
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
