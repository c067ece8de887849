package conformance_test

import (
	"testing"

	. "github.com/onsi/gomega"
)

// Bundle names follow Fleet's rule: NAME and the directory, joined with
// "-", cleaned, and capped at 53 characters with a hash; a name in fleet.yaml
// wins.
func TestBundleNames(t *testing.T) {
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
	cases := []struct {
		name  string
		files map[string]string
		args  []string
		want  []string
	}{{
		name:  "name and path joined",
		files: map[string]string{"single-cluster/helm/cm.yaml": manifest},
		args:  []string{"examples", "single-cluster/helm"},
		want:  []string{"examples-single-cluster-helm"},
	}, {
		name:  "fleet.yaml name wins",
		files: map[string]string{"app/fleet.yaml": "name: chosen\n", "app/cm.yaml": manifest},
		args:  []string{"examples", "app"},
		want:  []string{"chosen"},
	}, {
		name:  "upper case gets the md5 of \"repo-Apps\"",
		files: map[string]string{"Apps/cm.yaml": manifest},
		args:  []string{"repo", "Apps"},
		want:  []string{"repo-apps-d30036e1"},
	}, {
		name:  "long names are cut to 53 with a hash",
		files: map[string]string{"a-very-long-directory-name-for-a-bundle/and-another-level-of-it/cm.yaml": manifest},
		args:  []string{"examples", "a-very-long-directory-name-for-a-bundle/and-another-level-of-it"},
		want:  []string{"examples-a-very-long-directory-name-for-a-bundl-fbe28"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := apply(t, repo(t, tc.files), tc.args...)
			g.Expect(got.Err).NotTo(HaveOccurred())
			g.Expect(got.names()).To(Equal(tc.want))
		})
	}
}
