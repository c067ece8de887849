// Package dashboard holds the end-to-end specs of the web dashboard: headless
// Chromium (Debian's chromium, driven through the DevTools protocol by
// chromedp) reads the pages both ways of serving them, `fleet dashboard`'s
// loopback server with a kubeconfig's rights and the manager's server with
// bearer tokens, against a real manager, real agents and a real git server.
package dashboard
