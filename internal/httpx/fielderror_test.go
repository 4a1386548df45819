package httpx

import (
	"errors"
	"fmt"
	"testing"
)

func TestFieldErrorText(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &FieldError{Field: "num", Msg: "above maxPerGrab 5"})
	if got, want := err.Error(), "wrapped: num: above maxPerGrab 5"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "num" || fe.Msg != "above maxPerGrab 5" {
		t.Fatalf("errors.As = %+v", fe)
	}
}
