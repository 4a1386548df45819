package httpx

import (
	"encoding/json"
	"reflect"
	"strings"
)

// exactKeys refuses object keys that match a field only case-insensitively:
// encoding/json accepts "PROMOID" for promoId, but to the contract (additional
// properties false) it is an unknown field. It walks nested objects and arrays of
// the target type; raw messages are left to their own decoders.
func exactKeys(body []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == rawMessageType {
			return nil
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil {
			return nil // not an object here: the typed decode reports it
		}
		fields := jsonFields(t)
		for key, raw := range obj {
			f, ok := fields[key]
			if !ok {
				return Invalid(join(path, key), "unknown field")
			}
			if err := exactKeys(raw, f, join(path, key)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) != nil {
			return nil
		}
		for _, raw := range arr {
			if err := exactKeys(raw, t.Elem(), path); err != nil {
				return err
			}
		}
	}
	return nil
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			if f.Anonymous {
				for k, v := range jsonFields(derefType(f.Type)) {
					out[k] = v
				}
				continue
			}
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
