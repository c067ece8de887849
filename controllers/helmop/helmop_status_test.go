package helmop

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

func TestSetStatus(t *testing.T) {
	polling := &metav1.Duration{Duration: time.Minute}
	readyBundle := &fleet.Bundle{Status: fleet.BundleStatus{Summary: fleet.BundleSummary{Ready: 2, DesiredReady: 2}}}
	notReady := &fleet.Bundle{Status: fleet.BundleStatus{Summary: fleet.BundleSummary{Ready: 1, WaitApplied: 1, DesiredReady: 2,
		NonReadyResources: []fleet.NonReadyResource{{Name: "c2", State: fleet.WaitApplied, Message: "installing"}}}}}
	notReady.Name = "app"
	for _, tc := range []struct {
		name                    string
		version                 string
		interval                *metav1.Duration
		st                      opState
		bundle                  *fleet.Bundle
		accepted, polled, ready metav1.ConditionStatus
		readyReason, message    string
		display                 fleet.GitRepoDisplay
	}{
		{name: "deployed and ready", version: "1.x", st: opState{checked: true, applied: "1.2.0"}, bundle: readyBundle,
			accepted: metav1.ConditionTrue, ready: metav1.ConditionTrue, readyReason: fleet.ReasonReady,
			display: fleet.GitRepoDisplay{ReadyBundleDeployments: "2/2", State: "Ready"}},
		{name: "rolling out", version: "1.x", st: opState{checked: true, applied: "1.2.0"}, bundle: notReady,
			accepted: metav1.ConditionTrue, ready: metav1.ConditionFalse, readyReason: fleet.ReasonNotReady, message: "WaitApplied(1) [Bundle app: c2: installing]",
			display: fleet.GitRepoDisplay{ReadyBundleDeployments: "1/2", State: "WaitApplied", Message: "WaitApplied(1) [Bundle app: c2: installing]"}},
		{name: "refused before any bundle", version: "x", st: opState{checked: true, acceptErr: outcome.Stallf(fleet.ReasonInvalidVersion, "bad version")},
			accepted: metav1.ConditionFalse, ready: metav1.ConditionFalse, readyReason: fleet.ReasonInvalidVersion, message: "bad version",
			display: fleet.GitRepoDisplay{ReadyBundleDeployments: "0/0", Message: "bad version", Error: true}},
		{name: "poll failed, deployed version kept", version: "1.x", interval: polling,
			st: opState{checked: true, applied: "1.2.0", polled: true, pollErr: errors.New("repository down")}, bundle: readyBundle,
			accepted: metav1.ConditionTrue, polled: metav1.ConditionFalse, ready: metav1.ConditionFalse, readyReason: fleet.ReasonFetchFailed, message: "repository down",
			display: fleet.GitRepoDisplay{ReadyBundleDeployments: "2/2", State: "Ready", Message: "repository down", Error: true}},
		{name: "accepted, no bundle yet", version: "1.x", st: opState{checked: true, applied: "1.2.0"},
			accepted: metav1.ConditionTrue, ready: metav1.ConditionFalse, readyReason: fleet.ReasonNotReady, message: "no bundle yet",
			display: fleet.GitRepoDisplay{ReadyBundleDeployments: "0/0"}},
		{name: "exact version is not polled", version: "1.2.0", interval: polling, st: opState{checked: true, applied: "1.2.0", polled: true}, bundle: readyBundle,
			accepted: metav1.ConditionTrue, ready: metav1.ConditionTrue, readyReason: fleet.ReasonReady,
			display: fleet.GitRepoDisplay{ReadyBundleDeployments: "2/2", State: "Ready"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			op := &fleet.HelmOp{}
			op.Spec.Helm = &fleet.HelmOptions{Repo: "https://charts.example", Chart: "app", Version: tc.version}
			op.Spec.PollingInterval = tc.interval
			setStatus(op, &tc.st, tc.bundle)
			check := func(typ string, want metav1.ConditionStatus) {
				c := meta.FindStatusCondition(op.Status.Conditions, typ)
				if want == "" {
					g.Expect(c).To(BeNil(), typ)
					return
				}
				g.Expect(c).NotTo(BeNil(), typ)
				g.Expect(c.Status).To(Equal(want), typ)
			}
			check(fleet.ConditionAccepted, tc.accepted)
			check(fleet.ConditionPolled, tc.polled)
			check(fleet.ConditionReady, tc.ready)
			ready := meta.FindStatusCondition(op.Status.Conditions, fleet.ConditionReady)
			g.Expect(ready.Reason).To(Equal(tc.readyReason))
			g.Expect(ready.Message).To(Equal(tc.message))
			g.Expect(op.Status.Display).To(Equal(tc.display))
		})
	}
}

func TestPolls(t *testing.T) {
	g := NewWithT(t)
	op := func(repo, chart, version string, interval time.Duration) *fleet.HelmOp {
		o := &fleet.HelmOp{}
		o.Spec.Helm = &fleet.HelmOptions{Repo: repo, Chart: chart, Version: version}
		o.Spec.PollingInterval = &metav1.Duration{Duration: interval}
		return o
	}
	g.Expect(polls(op("https://c", "app", "1.x", time.Minute))).To(BeTrue())
	g.Expect(polls(op("https://c", "app", "", time.Minute))).To(BeTrue(), "empty is the newest version")
	g.Expect(polls(op("oci://r/app", "", "^1", time.Minute))).To(BeTrue())
	g.Expect(polls(op("https://c", "app", "1.2.3", time.Minute))).To(BeFalse(), "an exact version")
	g.Expect(polls(op("https://c", "app", "1.x", 0))).To(BeFalse(), "interval 0, Fleet's default")
	g.Expect(polls(op("", "https://c/app-1.0.0.tgz", "", time.Minute))).To(BeFalse(), "a chart URL")
}
