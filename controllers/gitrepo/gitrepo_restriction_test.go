package gitrepo

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestApplyRestriction(t *testing.T) {
	res := fleet.GitRepoRestriction{
		ObjectMeta:               metav1.ObjectMeta{Name: "r"},
		DefaultServiceAccount:    "deployer",
		AllowedServiceAccounts:   []string{"deployer"},
		DefaultClientSecretName:  "creds",
		AllowedClientSecretNames: []string{"creds"},
		AllowedRepoPatterns:      []string{`https://git\.example\.com/team/.*`},
		AllowedTargetNamespaces:  []string{"team"},
	}
	ok := fleet.GitRepoSpec{Repo: "https://git.example.com/team/app", TargetNamespace: "team"}
	tests := []struct {
		name    string
		mutate  func(*fleet.GitRepoSpec)
		wantErr string
	}{
		{name: "defaults fill empty fields"},
		{name: "service account not allowed", mutate: func(s *fleet.GitRepoSpec) { s.ServiceAccount = "cluster-admin" }, wantErr: "serviceAccount cluster-admin"},
		{name: "client secret not allowed", mutate: func(s *fleet.GitRepoSpec) { s.ClientSecretName = "other" }, wantErr: "clientSecretName other"},
		{name: "helm secret allowed", mutate: func(s *fleet.GitRepoSpec) { s.HelmSecretName = "creds" }},
		{name: "helm secret not allowed", mutate: func(s *fleet.GitRepoSpec) { s.HelmSecretName = "team-registry" }, wantErr: "helmSecretName team-registry"},
		{name: "target namespace required", mutate: func(s *fleet.GitRepoSpec) { s.TargetNamespace = "" }, wantErr: "empty targetNamespace denied, because allowedTargetNamespaces restriction is present: GitRepoRestriction r allows one of team: set spec.targetNamespace"},
		{name: "target namespace not allowed", mutate: func(s *fleet.GitRepoSpec) { s.TargetNamespace = "kube-system" }, wantErr: "disallowed targetNamespace kube-system: GitRepoRestriction r allows one of team: set spec.targetNamespace to one of them"},
		{name: "repo not allowed", mutate: func(s *fleet.GitRepoSpec) { s.Repo = "https://evil.test/x" }, wantErr: "does not allow repo"},
		{name: "repo patterns match as a whole", mutate: func(s *fleet.GitRepoSpec) { s.Repo = "https://evil.test/?https://git.example.com/team/x" }, wantErr: "does not allow repo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := ok
			if tt.mutate != nil {
				tt.mutate(&spec)
			}
			err := applyRestriction(&res, &spec)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(spec.ServiceAccount).To(Equal("deployer"))
			g.Expect(spec.ClientSecretName).To(Equal("creds"))
		})
	}
	g := NewWithT(t)
	empty := fleet.GitRepoSpec{Repo: "anything"}
	g.Expect(applyRestriction(&fleet.GitRepoRestriction{}, &empty)).To(Succeed(), "empty lists allow anything")
	g.Expect(empty.ClientSecretName).To(BeEmpty(), "no clientSecretName: the gitcredential Secret, if any, is used")

	// Without clientSecretName the GitRepo would use the default
	// gitcredential Secret: only where the restriction allows that name.
	noSecret := fleet.GitRepoSpec{Repo: "anything"}
	g.Expect(applyRestriction(&fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Name: "r"}, AllowedClientSecretNames: []string{"creds"}}, &noSecret)).
		To(MatchError(ContainSubstring("does not allow clientSecretName (none): use one of creds")))
	g.Expect(applyRestriction(&fleet.GitRepoRestriction{AllowedClientSecretNames: []string{"creds", "gitcredential"}}, &noSecret)).To(Succeed())
	g.Expect(noSecret.ClientSecretName).To(BeEmpty())
}
