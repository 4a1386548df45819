package client

import (
	"encoding/json"
	"testing"
)

// order is a grab of items (none: an empty list) by pin p at 10.0.0.1 under
// requestId r: the smallest body whose wire form a test spells out in full.
func order(items ...Item) GrabRequest {
	return GrabRequest{RequestID: "r", Pin: "p", IP: "10.0.0.1", Items: append([]Item{}, items...)}
}

// wire is v as the client sends it.
func wire(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%T: %v", v, err)
	}
	return string(b)
}

// wireFields is v as a server reads it without the client's types: the JSON
// object's fields.
func wireFields(t *testing.T, v any) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(wire(t, v)), &out); err != nil {
		t.Fatalf("%T: %v", v, err)
	}
	return out
}
