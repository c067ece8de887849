package v1alpha1

import (
	"encoding/json"
)

// GenericMap holds free-form JSON, such as Helm values. It marshals as the bare
// map, so {"replicas": 2} on the wire is Data["replicas"] here. It is a struct
// rather than a map so that deepcopy-gen and controller-gen accept it; numbers
// decode as float64, as encoding/json does.
//
// Fields of this type carry +kubebuilder:validation:Type=object and
// +kubebuilder:pruning:PreserveUnknownFields so that the API server keeps
// whatever they hold.
//
// +kubebuilder:object:generate=false
// +kubebuilder:validation:Type=object
// +kubebuilder:pruning:PreserveUnknownFields
type GenericMap struct {
	// Data is the map; nil marshals as null.
	Data map[string]interface{} `json:"-"`
}

// MarshalJSON writes Data as a JSON object.
func (in GenericMap) MarshalJSON() ([]byte, error) {
	return json.Marshal(in.Data)
}

// UnmarshalJSON reads a JSON object into Data.
func (in *GenericMap) UnmarshalJSON(data []byte) error {
	in.Data = nil
	return json.Unmarshal(data, &in.Data)
}

// DeepCopyInto copies in into out through a JSON round trip, which is exact for
// anything that came from JSON.
func (in *GenericMap) DeepCopyInto(out *GenericMap) {
	if in.Data == nil {
		out.Data = nil
		return
	}
	b, err := json.Marshal(in.Data)
	if err != nil {
		// Data that cannot be marshalled could not have been decoded or sent
		// to the API server either; a copy must not fail silently.
		panic(err)
	}
	var data map[string]interface{}
	if err := json.Unmarshal(b, &data); err != nil {
		panic(err)
	}
	out.Data = data
}

// DeepCopy returns a deep copy of in.
func (in *GenericMap) DeepCopy() *GenericMap {
	if in == nil {
		return nil
	}
	out := new(GenericMap)
	in.DeepCopyInto(out)
	return out
}
