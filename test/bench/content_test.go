package main

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestContentFilesHaveTheirSizeAndDifferByStorage(t *testing.T) {
	g := NewWithT(t)
	for _, s := range contentSizes {
		etcd, oci := contentFiles("etcd", s), contentFiles("oci", s)
		g.Expect(etcd).To(HaveLen(max(s.files, 1)))
		total := 0
		for name, text := range etcd {
			total += len(text)
			g.Expect(oci[name]).NotTo(Equal(text), "%s %s: the two storages must not share a content", s.label, name)
		}
		if s.files > 0 {
			g.Expect(total).To(BeNumerically("~", s.files*s.size, s.files*16), s.label)
		}
	}
	// The last is over etcd's 1.5 MiB request limit, the others under it.
	last := contentSizes[len(contentSizes)-1]
	g.Expect(last.files * last.size).To(BeNumerically(">", 1536<<10))
	g.Expect(contentSizes[len(contentSizes)-2].files * contentSizes[len(contentSizes)-2].size).To(BeNumerically("<", 1536<<10))
}

func TestParseEtcdTraffic(t *testing.T) {
	g := NewWithT(t)
	in, out, ok := parseEtcdTraffic("# HELP etcd_network_client_grpc_received_bytes_total The total number of bytes received from grpc clients.\n" +
		"# TYPE etcd_network_client_grpc_received_bytes_total counter\n" +
		"etcd_network_client_grpc_received_bytes_total 1.2345e+06\n" +
		"etcd_network_client_grpc_sent_bytes_total 98765\n" +
		"etcd_server_has_leader 1\n")
	g.Expect(ok).To(BeTrue())
	g.Expect(in).To(Equal(1234500.0))
	g.Expect(out).To(Equal(98765.0))
	_, _, ok = parseEtcdTraffic("etcd_server_has_leader 1\n")
	g.Expect(ok).To(BeFalse())
}

func TestBytesText(t *testing.T) {
	g := NewWithT(t)
	g.Expect(bytesText(980)).To(Equal("980 B"))
	g.Expect(bytesText(41 * 1024)).To(Equal("41.0 KiB"))
	g.Expect(bytesText(1.9 * (1 << 20))).To(Equal("1.90 MiB"))
	g.Expect(floorBytes(0)).To(Equal("-"))
}
