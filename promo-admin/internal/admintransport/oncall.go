package admintransport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/promo-admin/internal/adminendpoint"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
)

// RoleOnCall is on-call's role: it changes the switches document (PUT /v1/switches)
// and reads it and its history.
const RoleOnCall httpx.Role = "oncall"

// Routes of the timeline and of on-call's switches.
const (
	RouteTimeline      = "GET /v1/promotions/{promoId}/{type}/timeline"
	RoutePutSwitches   = "PUT /v1/switches"
	RouteSwitchHistory = "GET /v1/switches/history"
)

// MaxSwitchesBody bounds a PUT /v1/switches body: a document with long blocked
// lists is larger than the contract's 64 KiB for other bodies.
const MaxSwitchesBody = 4 << 20

// MaxSwitchReason bounds a change's reason, in characters.
const MaxSwitchReason = 500

var md5Pattern = regexp.MustCompile(`^([0-9a-f]{32})?$`)

type putSwitchesBody struct {
	Document json.RawMessage `json:"document"`
	IfMD5    *string         `json:"ifMd5"`
	Reason   *string         `json:"reason"`
}

func decodePutSwitches(_ context.Context, r *http.Request) (interface{}, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxSwitchesBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &httpx.Error{Status: http.StatusRequestEntityTooLarge, Code: "PAYLOAD_TOO_LARGE",
				Message: fmt.Sprintf("body larger than %d MiB; nothing was published", MaxSwitchesBody>>20)}
		}
		return nil, httpx.Invalid("", "could not read the body: "+err.Error())
	}
	var b putSwitchesBody
	if err := httpx.DecodeBytes(body, &b, false); err != nil {
		return nil, err
	}
	doc := bytes.TrimSpace(b.Document)
	if len(doc) == 0 || bytes.Equal(doc, []byte("null")) {
		return nil, httpx.Invalid("document", "is required: the whole switches document, a JSON object")
	}
	if doc[0] != '{' {
		return nil, httpx.Invalid("document", "must be a JSON object: the whole switches document")
	}
	if b.IfMD5 == nil {
		return nil, httpx.Invalid("ifMd5", `is required: the md5 of the document you read ("" when there is none)`)
	}
	if !md5Pattern.MatchString(*b.IfMD5) {
		return nil, httpx.Invalid("ifMd5", `must be 32 lowercase hex digits, or "" when there is no document`)
	}
	c := adminservice.SwitchesChange{Document: doc, IfMD5: *b.IfMD5}
	if b.Reason != nil {
		if utf8.RuneCountInString(*b.Reason) > MaxSwitchReason {
			return nil, httpx.Invalid("reason", fmt.Sprintf("must be at most %d characters", MaxSwitchReason))
		}
		c.Reason = *b.Reason
	}
	return adminendpoint.PutSwitchesRequest{Change: c}, nil
}

func decodeSwitchHistory(_ context.Context, r *http.Request) (interface{}, error) {
	q := r.URL.Query()
	sq := adminservice.SwitchHistoryQuery{Limit: store.DefaultSwitchHistory, Cursor: q.Get("cursor")}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil {
			return nil, httpx.Invalid("limit", fmt.Sprintf("must be an integer from 1 to %d", store.MaxSwitchHistory))
		}
		sq.Limit = n
	}
	if q.Has("cursor") && sq.Cursor == "" {
		return nil, httpx.Invalid("cursor", "must not be empty")
	}
	return adminendpoint.SwitchHistoryRequest{Query: sq}, nil
}

func decodeTimeline(_ context.Context, r *http.Request) (interface{}, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	return adminendpoint.TimelineRequest{ID: id}, nil
}

func encodeTimeline(ctx context.Context, w http.ResponseWriter, response interface{}) error {
	if refused(ctx, w, response) {
		return nil
	}
	httpx.WriteJSON(w, http.StatusOK, response.(adminendpoint.TimelineResponse).Timeline)
	return nil
}

func encodePutSwitches(ctx context.Context, w http.ResponseWriter, response interface{}) error {
	if refused(ctx, w, response) {
		return nil
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, response.(adminendpoint.PutSwitchesResponse).Result)
	return nil
}

func encodeSwitchHistory(ctx context.Context, w http.ResponseWriter, response interface{}) error {
	if refused(ctx, w, response) {
		return nil
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, response.(adminendpoint.SwitchHistoryResponse).Page)
	return nil
}
