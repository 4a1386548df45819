package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Admin is a client of promo-admin's promotions API, for merchandisers' tools and
// tests: create, read, list, change, stop and delete. It is safe for concurrent use.
type Admin struct {
	e *endpoint
}

// NewAdmin returns a client of promo-admin at c.BaseURL, sending c.Token (a
// merchandiser's; a viewer's token may only Get and List).
func NewAdmin(c Config) (*Admin, error) {
	e, err := newEndpoint(c)
	if err != nil {
		return nil, err
	}
	return &Admin{e: e}, nil
}

// Create creates a promotion (201). BUSY, 503 and transport errors are retried.
// When a retry finds the promotion ALREADY_EXISTS after a send whose answer was
// lost, Create reads it, and returns it if it is the one spec asked for (that
// send created it); otherwise the *Error has Code ALREADY_EXISTS.
func (a *Admin) Create(ctx context.Context, spec PromotionSpec) (*Promotion, error) {
	body, err := json.Marshal(spec)
	if err != nil {
		return nil, &Error{Op: OpCreatePromotion, FailedItem: -1, Err: err}
	}
	p, err := a.promotion(ctx, request{op: OpCreatePromotion, method: http.MethodPost, path: "/v1/promotions", body: body, judge: judgeAdminWrite})
	var e *Error
	if errors.As(err, &e) && e.Code == CodeAlreadyExists && e.Unknown {
		if got, gerr := a.Get(ctx, spec.PromoID, spec.Type); gerr == nil && sameSpec(spec, got) {
			return got, nil
		}
	}
	return p, err
}

// sameSpec reports whether p is what spec creates.
func sameSpec(spec PromotionSpec, p *Promotion) bool {
	buckets := max(spec.Buckets, 1)
	return p.PromoID == spec.PromoID && p.Type == spec.Type && p.Title == spec.Title && p.Total == spec.Total &&
		p.PerPinLimit == spec.PerPinLimit && p.PerIPLimit == spec.PerIPLimit && p.MaxPerGrab == max(spec.MaxPerGrab, 1) &&
		p.StartAt.Equal(spec.StartAt.Truncate(time.Millisecond)) && p.EndAt.Equal(spec.EndAt.Truncate(time.Millisecond)) && max(p.Buckets, 1) == buckets
}

// Get reads one promotion with its live counters (from its shard).
func (a *Admin) Get(ctx context.Context, promoID string, typ int) (*Promotion, error) {
	return a.promotion(ctx, request{op: OpGetPromotion, method: http.MethodGet, path: promotionPath(promoID, typ), judge: judgeRead})
}

// List reads a page of promotions, newest first; counters are the record's.
func (a *Admin) List(ctx context.Context, o ListOptions) (*PromotionPage, error) {
	q := url.Values{}
	if o.State != "" {
		q.Set("state", string(o.State))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	path := "/v1/promotions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	ans, n, err := a.e.do(ctx, request{op: OpListPromotions, method: http.MethodGet, path: path, judge: judgeRead})
	if err != nil {
		return nil, err
	}
	var page PromotionPage
	if err := decode(OpListPromotions, ans, n, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// Patch changes the fields p sets, atomically on the shard; a total below what is
// granted is refused BELOW_GRANTED. It sets values, so a retry of it changes
// nothing more: BUSY, 503 and transport errors are retried.
func (a *Admin) Patch(ctx context.Context, promoID string, typ int, p PromotionPatch) (*Promotion, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return nil, &Error{Op: OpPatchPromotion, FailedItem: -1, Err: err}
	}
	return a.promotion(ctx, request{op: OpPatchPromotion, method: http.MethodPatch, path: promotionPath(promoID, typ), body: body, judge: judgeAdminWrite})
}

// Stop stops a promotion now (idempotent): its grabs then answer STOPPED. The
// reason ("" for none) goes to the audit trail.
func (a *Admin) Stop(ctx context.Context, promoID string, typ int, reason string) (*Promotion, error) {
	body, err := json.Marshal(struct {
		Reason string `json:"reason,omitempty"`
	}{reason})
	if err != nil {
		return nil, &Error{Op: OpStopPromotion, FailedItem: -1, Err: err}
	}
	return a.promotion(ctx, request{op: OpStopPromotion, method: http.MethodPost, path: promotionPath(promoID, typ) + "/stop", body: body, judge: judgeAdminWrite})
}

// Delete deletes a promotion: its hash leaves Redis, its record stays (DELETED).
// A retry that finds it NOT_FOUND after a send whose answer was lost is taken for
// that send's success.
func (a *Admin) Delete(ctx context.Context, promoID string, typ int) error {
	_, _, err := a.e.do(ctx, request{op: OpDeletePromotion, method: http.MethodDelete, path: promotionPath(promoID, typ), judge: judgeAdminWrite})
	var e *Error
	if errors.As(err, &e) && e.Code == CodeNotFound && e.Unknown && e.Attempts > 1 {
		return nil
	}
	return err
}

func (a *Admin) promotion(ctx context.Context, r request) (*Promotion, error) {
	ans, n, err := a.e.do(ctx, r)
	if err != nil {
		return nil, err
	}
	var p Promotion
	if err := decode(r.op, ans, n, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func promotionPath(promoID string, typ int) string {
	return "/v1/promotions/" + url.PathEscape(promoID) + "/" + strconv.Itoa(typ)
}
