package main

import (
	"strings"
	"testing"
)

// configctl sends one token: promo-admin's variable form name:token gives its
// token, and a list (as promo-admin's variable may hold during a rotation) is
// refused with the variable's name rather than sent whole.
func TestNewAdminTakesOneToken(t *testing.T) {
	for token, want := range map[string]string{"t0k": "t0k", "ann:t0k": "t0k"} {
		a, err := newAdmin("http://127.0.0.1:8081", token, 0)
		if err != nil || a.token != want {
			t.Errorf("token %q: %+v %v, want %q", token, a, err, want)
		}
	}
	for _, token := range []string{"ann:old,ann:new", "old,new", ""} {
		if _, err := newAdmin("http://127.0.0.1:8081", token, 0); err == nil || !strings.Contains(err.Error(), OnCallTokenEnv) {
			t.Errorf("token %q: %v, want a refusal naming %s", token, err, OnCallTokenEnv)
		}
	}
}
