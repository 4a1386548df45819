package configcenter

import (
	"strings"
	"testing"
)

// A document without degradeMaxPerSecond runs with the default cap; a cap outside
// 1..MaxDegradeMaxPerSecond rejects the document whole, naming the field.
func TestParseDegradeMaxPerSecond(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`{"kafkaDegrade": true}`))
	if err != nil || s.DegradeMaxPerSecond != DefaultDegradeMaxPerSecond {
		t.Fatalf("no cap given: %v %v, want the default %d", s, err, DefaultDegradeMaxPerSecond)
	}
	if s, err := Parse([]byte(`{"degradeMaxPerSecond": 50}`)); err != nil || s.DegradeMaxPerSecond != 50 {
		t.Fatalf("cap 50: %v %v", s, err)
	}
	for _, bad := range []string{`0`, `-5`, `0.5`, `100001`, `"200"`, `null`} {
		_, err := Parse([]byte(`{"degradeMaxPerSecond": ` + bad + `}`))
		if bad == "null" { // null leaves the default, as for every field
			if err != nil {
				t.Fatalf("null: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "degradeMaxPerSecond") {
			t.Fatalf("degradeMaxPerSecond %s: %v, want a rejection naming the field", bad, err)
		}
	}
}
