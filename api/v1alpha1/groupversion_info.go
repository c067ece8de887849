package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "fleet.cattle.io", Version: "v1alpha1"}

	// SchemeBuilder adds the kinds of this package to a scheme; each kind's
	// file lists itself in init (see register).
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds every kind of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	// objectTypes are the kinds register was given.
	objectTypes []runtime.Object
)

// register lists objects among the kinds AddToScheme adds. It builds on
// apimachinery alone, so that importing this package does not pull in
// controller-runtime.
func register(objects ...runtime.Object) {
	objectTypes = append(objectTypes, objects...)
}

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, objectTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
