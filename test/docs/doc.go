// Package docs holds the tests that keep the repository's Markdown
// documentation navigable: every relative link in README.md and docs/ must
// point at a file of the repository and, when it names a #fragment, at a
// heading of that page as GitHub anchors it; every page under docs/ must be
// listed in the index, docs/README.md; and the front page must stay short.
// The tests read files only, with no network.
package docs
