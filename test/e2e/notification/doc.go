// Package notification holds the end-to-end specs of Notifications: a real
// manager, a real agent on a downstream control plane and a real git server
// roll out commits, and a loopback webhook receiver checks what the manager
// tells it about them, signature included.
package notification
