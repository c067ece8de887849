package release

// ServiceAccountUser is the user name the API server gives the
// ServiceAccount namespace/name. A release of a bundle with a
// serviceAccount is installed, upgraded, corrected and uninstalled as that
// account of the release namespace, impersonated: by fleet-agent-deploy and
// by the resident agent's drift correction alike.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}
