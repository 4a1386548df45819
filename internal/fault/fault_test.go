package fault

import (
	"errors"
	"testing"
)

func TestHook(t *testing.T) {
	var none Hook
	if err := none.At("anywhere"); err != nil {
		t.Fatalf("zero hook fired: %v", err)
	}
	stop := errors.New("stopped")
	var seen string
	h := Hook(func(p string) error {
		seen = p
		if p == "after-take" {
			return stop
		}
		return nil
	})
	if err := h.At("after-claim"); err != nil || seen != "after-claim" {
		t.Fatalf("after-claim: err %v, seen %q", err, seen)
	}
	if err := h.At("after-take"); !errors.Is(err, stop) {
		t.Fatalf("after-take: err %v, want %v", err, stop)
	}
}
