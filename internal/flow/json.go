package flow

import (
	"strconv"

	"github.com/flashsale/platform/internal/jsonx"
)

// AppendJSON appends the event as encoding/json writes it from its tags
// (FuzzFlowJSON holds the two to the same bytes): grab-service encodes one for
// every grant, and reflection was the larger part of that.
func (e Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"eventId":`...)
	b = jsonx.AppendString(b, e.EventID)
	b = append(b, `,"kind":`...)
	b = jsonx.AppendString(b, string(e.Kind))
	b = append(b, `,"requestId":`...)
	b = jsonx.AppendString(b, e.RequestID)
	b = append(b, `,"pin":`...)
	b = jsonx.AppendString(b, e.Pin)
	b = append(b, `,"ip":`...)
	b = jsonx.AppendString(b, e.IP)
	b = append(b, `,"items":`...)
	b = appendItems(b, e.Items)
	b = append(b, `,"occurredAt":`...)
	b = jsonx.AppendString(b, e.OccurredAt)
	if e.Reason != "" {
		b = append(b, `,"reason":`...)
		b = jsonx.AppendString(b, e.Reason)
	}
	if e.BodyHash != "" {
		b = append(b, `,"bodyHash":`...)
		b = jsonx.AppendString(b, e.BodyHash)
	}
	if e.HoldUntil != 0 {
		b = append(b, `,"holdUntil":`...)
		b = strconv.AppendInt(b, e.HoldUntil, 10)
	}
	if e.Channel != "" {
		b = append(b, `,"channel":`...)
		b = jsonx.AppendString(b, e.Channel)
	}
	return append(b, '}')
}

// AppendJSON appends the entry as encoding/json writes it: grab-service writes one
// for every grab (its claim), and a rebuild one for every request of the shard.
func (x RequestIndex) AppendJSON(b []byte) []byte {
	b = append(b, `{"h":`...)
	b = jsonx.AppendString(b, x.BodyHash)
	b = append(b, `,"pin":`...)
	b = jsonx.AppendString(b, x.Pin)
	b = append(b, `,"ip":`...)
	b = jsonx.AppendString(b, x.IP)
	b = append(b, `,"items":`...)
	b = appendItems(b, x.Items)
	if x.ClaimedMs != 0 {
		b = append(b, `,"at":`...)
		b = strconv.AppendInt(b, x.ClaimedMs, 10)
	}
	if x.HoldUntilMs != 0 {
		b = append(b, `,"hu":`...)
		b = strconv.AppendInt(b, x.HoldUntilMs, 10)
	}
	return append(b, '}')
}

// appendItems writes items as encoding/json does a slice without omitempty: null
// when nil.
func appendItems(b []byte, items []Item) []byte {
	if items == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendItemHead(b, it.PromoID, it.Type, it.Num)
		b = append(b, `,"shard":`...)
		b = strconv.AppendInt(b, int64(it.Shard), 10)
		if it.Bucket != 0 {
			b = append(b, `,"bucket":`...)
			b = strconv.AppendInt(b, int64(it.Bucket), 10)
		}
		if it.Buckets != 0 {
			b = append(b, `,"buckets":`...)
			b = strconv.AppendInt(b, int64(it.Buckets), 10)
		}
		if it.NoIP {
			b = append(b, `,"noIp":true`...)
		}
		if it.Amount != 0 {
			b = append(b, `,"amount":`...)
			b = strconv.AppendInt(b, it.Amount, 10)
		}
		if len(it.Parts) > 0 {
			b = append(b, `,"parts":[`...)
			for j, p := range it.Parts {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, int64(p), 10)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// AppendItemHead opens an item of the contract's shape and appends the fields
// every such item has (promoId, type, num), for the flow event's items and the
// grab answer's alike; the caller adds its own fields and the closing brace.
func AppendItemHead(b []byte, promoID string, typ int, num int64) []byte {
	b = append(b, `{"promoId":`...)
	b = jsonx.AppendString(b, promoID)
	b = append(b, `,"type":`...)
	b = strconv.AppendInt(b, int64(typ), 10)
	b = append(b, `,"num":`...)
	return strconv.AppendInt(b, num, 10)
}
