package grab

import (
	"context"
	"testing"
)

// The status read is shared by every caller waiting on the key, so it must not run
// on its first caller's context: a client that hung up (here, one gone before the
// read began, which go-redis refuses at once) would fail everyone waiting with it.
func TestStatusReadOutlivesItsFirstCaller(t *testing.T) {
	t.Parallel()
	f := newSilentIndex(t, 5, `{}`) // the index stays answering: only a Grabber on one server is wanted
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	st, err := f.svc.Status(gone, f.id, 1)
	if err != nil {
		t.Fatalf("status for a caller gone before the read: %v; the shared read must run on its own context", err)
	}
	if st.Remaining != 5 {
		t.Fatalf("status %+v, want remaining 5", st)
	}
}
