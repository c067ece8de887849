package outcome

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// fieldPatch is the JSON merge patch from status b to status o (values of
// one struct type), field by field: only the fields that differ are
// encoded, and only an object's field is diffed further. It is the patch
// jsonpatch.CreateMergePatch makes of the two whole encodings (a field
// added or changed carries its new value, an object field its own merge
// patch, a field gone null), without encoding and decoding every field of
// the status at every write. ok is false for a struct it does not handle
// (an embedded or inline field, a field without a plain JSON name): the
// caller diffs the whole encodings then.
func fieldPatch(b, o reflect.Value) (patch json.RawMessage, ok bool, err error) {
	t := b.Type()
	if t.Kind() != reflect.Struct || o.Type() != t {
		return nil, false, nil
	}
	fields := make([]jsonField, 0, t.NumField())
	for i := range t.NumField() {
		f, ok := jsonFieldOf(t.Field(i))
		if !ok {
			return nil, false, nil
		}
		if f.name != "" {
			f.index = i
			fields = append(fields, f)
		}
	}
	var out bytes.Buffer
	out.WriteByte('{')
	n := 0
	add := func(name string, value []byte) error {
		if n > 0 {
			out.WriteByte(',')
		}
		n++
		key, err := json.Marshal(name)
		if err != nil {
			return err
		}
		out.Write(key)
		out.WriteByte(':')
		out.Write(value)
		return nil
	}
	for _, f := range fields {
		bf, of := b.Field(f.index), o.Field(f.index)
		if reflect.DeepEqual(bf.Interface(), of.Interface()) {
			continue
		}
		bIn, oIn := f.present(bf), f.present(of)
		var value []byte
		switch {
		case !bIn && !oIn:
			continue
		case !oIn:
			value = []byte("null")
		default:
			oj, err := json.Marshal(addr(of))
			if err != nil {
				return nil, true, err
			}
			value = oj
			if bIn && isObject(oj) {
				bj, err := json.Marshal(addr(bf))
				if err != nil {
					return nil, true, err
				}
				if isObject(bj) {
					sub, err := jsonpatch.CreateMergePatch(bj, oj)
					if err != nil {
						return nil, true, err
					}
					if string(sub) == "{}" {
						continue
					}
					value = sub
				} else if bytes.Equal(bj, oj) {
					continue
				}
			} else if bIn {
				bj, err := json.Marshal(addr(bf))
				if err != nil {
					return nil, true, err
				}
				if bytes.Equal(bj, oj) {
					continue
				}
			}
		}
		if err := add(f.name, value); err != nil {
			return nil, true, err
		}
	}
	out.WriteByte('}')
	return out.Bytes(), true, nil
}

// jsonField is how encoding/json writes one struct field.
type jsonField struct {
	name      string
	index     int
	omitEmpty bool
	omitZero  bool
}

// jsonFieldOf reads f's json tag; name "" for a field never written. ok is
// false for what fieldPatch leaves to the whole encodings.
func jsonFieldOf(f reflect.StructField) (jsonField, bool) {
	tag, tagged := f.Tag.Lookup("json")
	if tag == "-" || !f.IsExported() {
		return jsonField{}, !f.Anonymous
	}
	if f.Anonymous || !tagged {
		return jsonField{}, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" {
		return jsonField{}, false
	}
	jf := jsonField{name: name}
	for opt := range strings.SplitSeq(opts, ",") {
		switch opt {
		case "omitempty":
			jf.omitEmpty = true
		case "omitzero":
			jf.omitZero = true
		case "string", "inline":
			return jsonField{}, false
		}
	}
	return jf, true
}

// present tells whether encoding/json writes the field's value v.
func (f jsonField) present(v reflect.Value) bool {
	if f.omitEmpty && isEmptyValue(v) {
		return false
	}
	if f.omitZero {
		if z, ok := v.Interface().(interface{ IsZero() bool }); ok {
			if (v.Kind() != reflect.Pointer && v.Kind() != reflect.Interface) || !v.IsNil() {
				return !z.IsZero()
			}
			return false
		}
		return !v.IsZero()
	}
	return true
}

// isEmptyValue is encoding/json's omitempty test.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

func isObject(j []byte) bool {
	return len(j) > 0 && j[0] == '{'
}
