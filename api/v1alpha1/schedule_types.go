package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register(&Schedule{}, &ScheduleList{})
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Duration",type=string,JSONPath=`.spec.duration`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.active`
// +kubebuilder:printcolumn:name="NextStart",type=string,JSONPath=`.status.nextStartTime`

// Schedule is a deployment window, as Fleet's: from each time its cron
// schedule fires, for its duration, the clusters it targets take new
// deployments; outside their windows they keep what they run.
type Schedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the window and the clusters it holds.
	Spec ScheduleSpec `json:"spec,omitempty"`
	// Status says whether the window is open and which clusters it holds.
	Status ScheduleStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ScheduleList is a list of Schedules.
type ScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Schedules.
	Items []Schedule `json:"items"`
}

// ScheduleSpec is a deployment window and the clusters it applies to.
type ScheduleSpec struct {
	// Schedule is a cron expression for when each window opens: six fields
	// with seconds first, as in Fleet ("0 0 22 * * MON-FRI"), or the
	// classic five without seconds; descriptors such as @daily too.
	Schedule string `json:"schedule,omitempty"`
	// Duration is how long each window stays open (a Go duration: 30s, 2h,
	// 1h30m); it must be shorter than the time between two windows.
	// +kubebuilder:validation:Type=string
	Duration metav1.Duration `json:"duration,omitempty"`
	// Location is the IANA time zone the schedule is read in
	// (Europe/Berlin); default the manager's local time zone, as in Fleet.
	Location string `json:"location,omitempty"`
	// Targets are the clusters of the Schedule's namespace it holds.
	Targets ScheduleTargets `json:"targets,omitempty"`
}

// ScheduleTargets are the clusters a Schedule holds.
type ScheduleTargets struct {
	// Clusters: a cluster is held when any entry selects it.
	Clusters []ScheduleTarget `json:"clusters,omitempty"`
}

// ScheduleTarget selects clusters, by name, labels, group or group labels;
// the fields it sets must all match.
type ScheduleTarget struct {
	// Name is the name of this target.
	// +nullable
	Name string `json:"name,omitempty"`
	// ClusterName is the name of a cluster.
	// +nullable
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector selects clusters by their labels.
	// +nullable
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup is the name of a ClusterGroup in the Schedule's
	// namespace.
	// +nullable
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// ClusterGroupSelector selects ClusterGroups by their labels.
	// +nullable
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
}

// ScheduleStatus says whether the window is open and which clusters it
// holds.
type ScheduleStatus struct {
	// Active is true while a window is open.
	Active bool `json:"active,omitempty"`
	// NextStartTime is when the next window opens.
	NextStartTime metav1.Time `json:"nextStartTime,omitempty"`
	// MatchingClusters names the clusters the Schedule holds.
	MatchingClusters []string `json:"matchingClusters,omitempty"`
	// Conditions: Ready (False, naming the field, when the schedule,
	// duration or location is invalid).
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the status was computed for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// GetConditions returns the Schedule's status conditions.
func (s *Schedule) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions replaces the Schedule's status conditions.
func (s *Schedule) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }
