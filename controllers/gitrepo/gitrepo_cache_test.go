package gitrepo

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
)

// Two managers given one git cache directory: the second fails at once,
// saying what to do, and gets it once the first let it go; the default
// directories of two managers are different, and go with their manager.
func TestCacheDirIsOneManagers(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "cache")
	first, release, err := cacheDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first).To(Equal(dir))
	_, _, err = cacheDir(dir)
	g.Expect(err).To(MatchError(ContainSubstring("is in use by another manager process (pid " + strconv.Itoa(os.Getpid()) + ")")))
	g.Expect(err).To(MatchError(ContainSubstring("give each manager its own --git-cache-dir")))
	release()
	_, again, err := cacheDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	again()
	g.Expect(dir).To(BeADirectory(), "a directory given is kept")

	a, releaseA, err := cacheDir("")
	g.Expect(err).NotTo(HaveOccurred())
	b, releaseB, err := cacheDir("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).NotTo(Equal(b))
	releaseA()
	releaseB()
	g.Expect(a).NotTo(BeAnExistingFile())
	g.Expect(b).NotTo(BeAnExistingFile())
}
