package apitest_test

import (
	"testing"

	"github.com/flashsale/platform/internal/apitest"
)

// Each answer's result or code is a named enum of its own (GrantedResult,
// GrabUnavailableResult, CreateConflictCode...): a value of the base enum that the
// answer's own does not list is still refused, in a oneOf's branches too.
func TestEachAnswerHoldsItsOwnEnum(t *testing.T) {
	t.Parallel()
	const cancelBody = `{"pin":"p"}`
	cases := []struct {
		name, service, method, path, reqBody string
		status                               int
		body                                 string
		refused                              bool
	}{
		{"grab 200 GRANTED", apitest.GrabService, "POST", "/v1/grab", grabBody, 200, `{"requestId":"r1","result":"GRANTED"}`, false},
		{"grab 409 GRANTED", apitest.GrabService, "POST", "/v1/grab", grabBody, 409, `{"requestId":"r1","result":"GRANTED"}`, true},
		{"grab 403 BLOCKED", apitest.GrabService, "POST", "/v1/grab", grabBody, 403, `{"requestId":"r1","result":"BLOCKED"}`, false},
		{"grab 403 SOLD_OUT", apitest.GrabService, "POST", "/v1/grab", grabBody, 403, `{"requestId":"r1","result":"SOLD_OUT"}`, true},
		{"grab 403 code UNAUTHORIZED", apitest.GrabService, "POST", "/v1/grab", grabBody, 403, `{"code":"UNAUTHORIZED","message":"m"}`, true},
		{"grab 503 DEGRADED", apitest.GrabService, "POST", "/v1/grab", grabBody, 503, `{"requestId":"r1","result":"DEGRADED"}`, false},
		{"grab 503 GRANTED", apitest.GrabService, "POST", "/v1/grab", grabBody, 503, `{"requestId":"r1","result":"GRANTED"}`, true},
		{"grab 503 code INTERNAL", apitest.GrabService, "POST", "/v1/grab", grabBody, 503, `{"code":"INTERNAL","message":"m"}`, true},
		{"cancel 200 ALREADY_RETURNED", apitest.GrabService, "POST", "/v1/grab/r1/cancel", cancelBody, 200, `{"requestId":"r1","result":"ALREADY_RETURNED"}`, false},
		{"cancel 200 CONFIRMED", apitest.GrabService, "POST", "/v1/grab/r1/cancel", cancelBody, 200, `{"requestId":"r1","result":"CONFIRMED"}`, true},
		{"confirm 503 DEGRADED", apitest.GrabService, "POST", "/v1/grab/r1/confirm", cancelBody, 503, `{"requestId":"r1","result":"DEGRADED"}`, true},
		{"cancel 404 code BUSY", apitest.GrabService, "POST", "/v1/grab/r1/cancel", cancelBody, 404, `{"code":"BUSY","message":"m"}`, true},
		{"create 409 BUSY", apitest.PromoAdmin, "POST", "/v1/promotions", "", 409, `{"code":"BUSY","message":"m"}`, false},
		{"create 409 STOPPED", apitest.PromoAdmin, "POST", "/v1/promotions", "", 409, `{"code":"STOPPED","message":"m"}`, true},
	}
	for _, c := range cases {
		errs := exchange(c.service, c.method, c.path, c.reqBody, checkout, c.status, jsonHeader(), c.body)
		if c.refused != (len(errs) > 0) {
			t.Errorf("%s: want refused %v, reported %q", c.name, c.refused, errs)
		}
	}
}
