package admintransport

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-kit/kit/endpoint"

	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/promo-admin/internal/adminendpoint"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
)

func encodeCreated(ctx context.Context, w http.ResponseWriter, response interface{}) error {
	if refused(ctx, w, response) || encodeProposed(w, response) {
		return nil
	}
	httpx.WriteJSON(w, http.StatusCreated, response.(adminendpoint.PromotionResponse).Promotion)
	return nil
}

func encodePromotion(ctx context.Context, w http.ResponseWriter, response interface{}) error {
	if refused(ctx, w, response) || encodeProposed(w, response) {
		return nil
	}
	httpx.WriteJSON(w, http.StatusOK, response.(adminendpoint.PromotionResponse).Promotion)
	return nil
}

func encodeHistory(ctx context.Context, w http.ResponseWriter, response interface{}) error {
	if refused(ctx, w, response) {
		return nil
	}
	h := response.(adminendpoint.HistoryResponse).History
	if h.Entries == nil {
		h.Entries = []store.AuditEntry{}
	}
	httpx.WriteJSON(w, http.StatusOK, h)
	return nil
}

func encodeList(ctx context.Context, w http.ResponseWriter, response interface{}) error {
	if refused(ctx, w, response) {
		return nil
	}
	httpx.WriteJSON(w, http.StatusOK, response.(adminendpoint.ListResponse).Page)
	return nil
}

func encodeDeleted(ctx context.Context, w http.ResponseWriter, response interface{}) error {
	if refused(ctx, w, response) {
		return nil
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// refused writes a business refusal carried in the response, if there is one.
func refused(ctx context.Context, w http.ResponseWriter, response interface{}) bool {
	if f, ok := response.(endpoint.Failer); ok && f.Failed() != nil {
		encodeError(ctx, f.Failed(), w)
		return true
	}
	return false
}

// encodeError is the one error encoder: it maps the service's errors to the
// contract's codes and lets httpx.WriteError write the body.
func encodeError(ctx context.Context, err error, w http.ResponseWriter) {
	httpx.WriteError(ctx, contractError(err), w)
}

func contractError(err error) error {
	var (
		he *httpx.Error
		fe *httpx.FieldError
		ue *adminservice.UnavailableError
	)
	if ae := approvalError(err); ae != nil {
		return ae
	}
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &fe):
		return httpx.Invalid(fe.Field, fe.Msg)
	case errors.Is(err, adminservice.ErrNotFound):
		return httpx.NotFound("no such promotion")
	case errors.Is(err, adminservice.ErrExists):
		return httpx.Conflict("ALREADY_EXISTS", err.Error())
	case errors.Is(err, adminservice.ErrBusy):
		return httpx.Conflict("BUSY", err.Error())
	case errors.Is(err, adminservice.ErrArchived):
		return httpx.Conflict("STOPPED", adminservice.ErrArchived.Error())
	case errors.Is(err, adminservice.ErrStopped):
		return httpx.Conflict("STOPPED", "the promotion is stopped; a stopped promotion cannot be changed")
	case errors.Is(err, adminservice.ErrBelowGranted):
		return httpx.Conflict("BELOW_GRANTED", err.Error())
	case errors.Is(err, adminservice.ErrSwitchesChanged):
		return httpx.Conflict("SWITCHES_CHANGED", err.Error())
	case errors.Is(err, adminservice.ErrEnvelopeFixed):
		return httpx.Conflict("ENVELOPE_FIXED", err.Error())
	case errors.As(err, &ue):
		return httpx.Unavailable(ue.Dependency + ": " + ue.Msg)
	}
	return err
}
