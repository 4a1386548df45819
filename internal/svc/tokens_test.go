package svc

import (
	"strings"
	"testing"

	"github.com/flashsale/platform/internal/httpx"
)

// A token's name is one person however the entry spells it (trimmed, lower case),
// and outside --local with approvers among the roles (promo-admin with
// --require-approval) every merchandiser and approver entry must name its person:
// a name made from the token's hash would make one person holding two tokens two.
func TestTokenNamesAreNormalisedAndNamedWithApproval(t *testing.T) {
	const a, b = "0123456789abcdef0123", "fedcba9876543210fedc"
	merch := TokenSpec{Env: "FLASHSALE_TEST_MERCH_TOKEN", Role: httpx.RoleMerchandiser}
	appr := TokenSpec{Env: "FLASHSALE_TEST_APPROVER_TOKEN", Role: httpx.RoleApprover}
	t.Setenv(merch.Env, " Alice :"+a)
	t.Setenv(appr.Env, "ALICE:"+b)
	ts, err := Tokens(false, merch, appr)
	if err != nil || len(ts) != 2 || ts[0].Name != "alice" || ts[1].Name != "alice" || ts[0].Token != a {
		t.Fatalf("named entries: %+v %v, want both named alice", ts, err)
	}
	t.Setenv(merch.Env, "carol:"+a+","+b)
	_, err = Tokens(false, merch, appr)
	if err == nil || !strings.Contains(err.Error(), merch.Env) || !strings.Contains(err.Error(), "name:token") {
		t.Fatalf("an unnamed merchandiser entry with approvers: %v, want a refusal naming %s", err, merch.Env)
	}
	t.Setenv(merch.Env, "carol:"+a)
	t.Setenv(appr.Env, " :"+b)
	if _, err := Tokens(false, merch, appr); err == nil || !strings.Contains(err.Error(), appr.Env) {
		t.Fatalf("an approver entry with a blank name: %v, want a refusal naming %s", err, appr.Env)
	}
	if ts, err := Tokens(true, merch, appr); err != nil || !strings.HasPrefix(ts[1].Name, "token-") {
		t.Fatalf("unnamed in local mode: %+v %v, want accepted, named by its hash", ts, err)
	}
	t.Setenv(merch.Env, b)
	if ts, err := Tokens(false, merch); err != nil || !strings.HasPrefix(ts[0].Name, "token-") {
		t.Fatalf("unnamed without approvers: %+v %v, want accepted as before", ts, err)
	}
}
