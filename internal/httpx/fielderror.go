package httpx

// FieldError is a request a service refuses for one of its fields (a num above
// the promotion's maxPerGrab, a bad path or query parameter): the contract's
// INVALID_REQUEST naming the field. Nothing was changed.
type FieldError struct {
	Field, Msg string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }
