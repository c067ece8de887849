package e2e

import (
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// WaitFor polls cond every poll until it passes, for at most timeout, and
// fails the spec with a message naming what it waited for. Specs wait only on
// conditions like this (or with Eventually and a description), never by
// sleeping.
func WaitFor(what string, cond func(gomega.Gomega), timeout, poll time.Duration) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(cond).WithTimeout(timeout).WithPolling(poll).Should(gomega.Succeed(), "waited %s for %s", timeout, what)
}

// HoldsFor checks that cond passes at every poll for the whole of d, and
// fails the spec naming what had to hold. It is how a spec lets time pass on
// purpose (an outage that lasts, a period without writes), never a bare
// sleep.
func HoldsFor(what string, cond func(gomega.Gomega), d, poll time.Duration) {
	ginkgo.GinkgoHelper()
	gomega.Consistently(cond).WithTimeout(d).WithPolling(poll).Should(gomega.Succeed(), "%s, for %s", what, d)
}
