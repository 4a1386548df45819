package main

import (
	"slices"
	"testing"
)

// The second grab-service gets ports of its own whether the stack's command line
// names them or leaves them to the defaults.
func TestWithFlag(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"bin/grab-service", "--listen", "a:1", "--ops-listen", "a:2", "--local"}, []string{"bin/grab-service", "--listen", "b:1", "--ops-listen", "b:2", "--local"}},
		{[]string{"bin/grab-service", "-listen", "a:1", "--local"}, []string{"bin/grab-service", "-listen", "b:1", "--local", "--ops-listen", "b:2"}},
		{[]string{"bin/grab-service"}, []string{"bin/grab-service", "--listen", "b:1", "--ops-listen", "b:2"}},
	} {
		if have := withFlag(withFlag(slices.Clone(c.in), "listen", "b:1"), "ops-listen", "b:2"); !slices.Equal(have, c.want) {
			t.Errorf("%v: have %v, want %v", c.in, have, c.want)
		}
	}
}
