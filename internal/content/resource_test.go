package content

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestEncodeDecodeResource(t *testing.T) {
	tests := []struct {
		name     string
		data     []byte
		encoding string
	}{
		{"text", []byte("kind: ConfigMap\n"), ""},
		{"empty", []byte{}, ""},
		{"binary", []byte{0x00, 0xff, 0xfe, 0x80}, EncodingBase64Gz},
		{"invalid UTF-8 in text", []byte("caf\xe9\n"), EncodingBase64Gz},
		{"large text", bytes.Repeat([]byte("x"), CompressAbove+1), EncodingBase64Gz},
		{"at the limit", bytes.Repeat([]byte("x"), CompressAbove), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r, err := EncodeResource("f", tt.data)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Name).To(Equal("f"))
			g.Expect(r.Encoding).To(Equal(tt.encoding))
			back, err := DecodeResource(r)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(back).To(Equal(tt.data))
		})
	}
}

func TestDecodeResourceRejects(t *testing.T) {
	for name, r := range map[string]fleet.BundleResource{
		`unknown encoding "zip"`:           {Name: "f", Encoding: "zip"},
		"resource f: illegal base64":       {Name: "f", Content: "!!!", Encoding: EncodingBase64Gz},
		"resource f: gzip: invalid header": {Name: "f", Content: "dGhpcyBpcyBub3QgZ3ppcCBkYXRh", Encoding: EncodingBase64Gz},
	} {
		_, err := DecodeResource(r)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring(name)), name)
	}
}
