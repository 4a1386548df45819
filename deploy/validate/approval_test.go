package validate

import (
	"strings"
	"testing"
)

// Production promo-admin runs with --require-approval: an invocation without it is
// refused, one with it is not refused for it.
func TestPromoAdminMustRequireApproval(t *testing.T) {
	base := []string{"--listen", ":8081", "--ops-listen", ":9181", "--redis", strings.Join(composeWant.Redis, ","),
		"--redis-sentinels", strings.Join(composeWant.Sentinels, ","), "--kafka", strings.Join(composeWant.Kafka, ",")}
	for _, c := range []struct {
		args    []string
		refused bool
	}{
		{base, true},
		{append(append([]string{}, base...), "--require-approval"), false},
		{append(append([]string{}, base...), "--require-approval=false"), true},
	} {
		var errs Errs
		CheckInvocation(Invocation{Where: "test", Binary: "promo-admin", Args: c.args, Env: map[string]bool{}}, composeWant, &errs, func(string) {})
		refused := strings.Contains(strings.Join(errs, "\n"), "--require-approval")
		if refused != c.refused {
			t.Errorf("promo-admin %v: refused for approval %v, want %v (%v)", c.args[len(c.args)-1], refused, c.refused, errs)
		}
	}
}
