package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
)

// MaxBody is the contract's body limit.
const MaxBody = 64 << 10

// DecodeJSON reads one JSON object from r's body into v, strictly: at most 64 KiB
// (413 beyond), no unknown fields, no trailing data, types as declared. Every
// refusal names the offending field. allowEmpty accepts an absent body as {}.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	body, err := ReadBody(w, r)
	if err != nil {
		return err
	}
	return DecodeBytes(body, v, allowEmpty)
}

// ReadBody reads r's body, at most 64 KiB (413 beyond).
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, errTooLarge
		}
		return nil, Invalid("", "could not read the body: "+err.Error())
	}
	return body, nil
}

// DecodeBytes is DecodeJSON's parser, apart so fuzz targets can drive it.
func DecodeBytes(body []byte, v any, allowEmpty bool) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		if allowEmpty {
			return nil
		}
		return Invalid("", "a JSON body is required")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return Invalid("", "unexpected data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return Invalid("", "unexpected data after the JSON object")
	}
	if err := duplicateKeys(body); err != nil {
		return err
	}
	return exactKeys(body, reflect.TypeOf(v), "")
}

func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return Invalid("", "the body must be a JSON object")
		}
		return Invalid(field, fmt.Sprintf("must be a JSON %s, got %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value))
	case errors.As(err, &syntaxErr):
		return Invalid("", fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, syntaxErr))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Invalid("", "malformed JSON: unexpected end of body")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return Invalid(field, "unknown field")
	}
	var e *Error
	if errors.As(err, &e) { // a custom UnmarshalJSON (times, for one) names its field
		return e
	}
	return Invalid("", "malformed JSON: "+err.Error())
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "integer"
	case "float32", "float64":
		return "number"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "struct", "map", "ptr":
		return "object"
	}
	return goKind
}
