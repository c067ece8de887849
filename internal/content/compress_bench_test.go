package content

import (
	"bytes"
	"compress/gzip"
	"testing"
)

var manifest = []byte(`{"resources":[{"name":"cm.yaml","content":"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app001\ndata:\n  value: \"17\"\n"},{"name":"fleet.yaml","content":"defaultNamespace: monorepo\n"}]}`)

func BenchmarkCompress(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compress(manifest); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompressNewWriter is Compress as it was: a new writer each time.
func BenchmarkCompressNewWriter(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(manifest)
		_ = zw.Close()
	}
}
