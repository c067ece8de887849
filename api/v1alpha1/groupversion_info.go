package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "fleet.cattle.io", Version: "v1alpha1"}

	// SchemeBuilder collects the kinds of this package; each kind's file
	// registers itself in init.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds every kind of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
