// Package dashboard serves fleet's read-only web dashboard: an overview, the
// GitRepos and HelmOps, a matrix of bundles by clusters, a bundle's and a
// cluster's pages, and the registration tokens. Pages are rendered on the
// server with html/template from what a watch-fed cache holds; a little
// JavaScript (embedded, like the style sheet: nothing is fetched from the
// network) follows the server-sent events of /events and re-renders the page
// when something it may show changed.
//
// One Server serves both ways of running it: `fleet dev`-style local serving
// by `fleet dashboard` (a cache made with the caller's kubeconfig, and a
// one-time secret in the URL it prints, so no other local user or web page can
// read through it), and serving by fleet-manager (--dashboard-bind-address),
// where every request carries a bearer token checked with a TokenReview and
// every object is shown only if a SubjectAccessReview says its user may list
// objects of its kind in its namespace: the dashboard never shows more than
// kubectl would.
package dashboard
