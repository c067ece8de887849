package enqueue_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/enqueue"
)

func TestIgnoreHeartbeats(t *testing.T) {
	old := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", ResourceVersion: "1", Labels: map[string]string{"env": "dev"}}}
	old.Status.Agent.LastSeen = metav1.NewTime(time.Unix(100, 0))
	beat := old.DeepCopy()
	beat.ResourceVersion = "2"
	beat.Status.Agent.LastSeen = metav1.NewTime(time.Unix(200, 0))
	relabel := old.DeepCopy()
	relabel.Labels["env"] = "prod"
	counted := beat.DeepCopy()
	counted.Status.Summary.Ready = 3
	deleting := beat.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(300, 0)}

	cases := []struct {
		name string
		new  *fleet.Cluster
		want bool
	}{
		{name: "a heartbeat alone", new: beat, want: false},
		{name: "a label change", new: relabel, want: true},
		{name: "a heartbeat with a status change", new: counted, want: true},
		{name: "a heartbeat with a deletion", new: deleting, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(enqueue.IgnoreHeartbeats().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tc.new})).To(Equal(tc.want))
		})
	}
}
