package localcluster_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gitfleet/fleet/internal/localcluster"
)

// Three control planes started together are three clusters: each has its own
// etcd, so its own kube-system UID, and its own working kubeconfig.
func TestStartNIndependent(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	start := time.Now()
	cps, err := localcluster.StartN(3, "independent", localcluster.Options{CAPI: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("Started 3 control planes in %s", time.Since(start).Round(time.Millisecond))
	defer func() {
		for _, cp := range cps {
			g.Expect(cp.Stop()).To(Succeed())
		}
	}()

	uids := map[types.UID]string{}
	for _, cp := range cps {
		uid, err := cp.KubeSystemUID(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(uid).NotTo(BeEmpty())
		uids[uid] = cp.Name

		// The kubeconfig written for other processes reaches the same server.
		raw, err := os.ReadFile(cp.Kubeconfig)
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.Host).To(Equal(cp.Config.Host))
	}
	g.Expect(uids).To(HaveLen(3), "every control plane must have its own kube-system namespace")

	// A stopped control plane does not take the others with it.
	g.Expect(cps[0].Stop()).To(Succeed())
	cps = cps[1:]
	for _, cp := range cps {
		_, err := cp.KubeSystemUID(ctx)
		g.Expect(err).NotTo(HaveOccurred())
	}
}
