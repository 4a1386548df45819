package flowsink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/store"
)

// deadLetter logs the poison message and makes its dead-letter copy: the original
// key and value, and headers saying why and where it came from, so it can be
// inspected (kcat -t promo-grab-flow-dlq) and replayed once fixed.
func (s *Sink) deadLetter(m kafka.Message, cause error) kafka.Message {
	src := fmt.Sprintf("%s/%d@%d", m.Topic, m.Partition, m.Offset)
	s.log.Error("flow message sent to the dead-letter topic", "source", src, "key", string(m.Key),
		"deadLetterTopic", s.cfg.DeadLetterTopic, "err", cause.Error())
	return kafka.Message{Key: m.Key, Value: m.Value, Headers: []kafka.Header{
		{Key: "flashsale-error", Value: []byte(cause.Error())},
		{Key: "flashsale-source", Value: []byte(src)},
	}}
}

func jsonEvent(e flow.Event) ([]byte, error) { return json.Marshal(e) }

// isDataError reports MySQL refusing the values themselves, which no retry fixes:
// data too long (1406), out of range (1264), incorrect value (1366, 1292),
// null in a NOT NULL column (1048).
func isDataError(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1048, 1264, 1292, 1366, 1406:
		return true
	}
	return false
}

// DeadLetterLog keeps the dead letters in the record (store.Flows), so a rebuild or
// verify of a promotion they name can refuse until they are replayed.
type DeadLetterLog interface {
	RecordDeadLetters(ctx context.Context, letters []store.DeadLetter) error
}

// lettersOf reads what it can of each dead message: its key, and the kind and
// promotions of an event that is readable JSON though not a valid one.
func lettersOf(dead []kafka.Message) []store.DeadLetter {
	var out []store.DeadLetter
	for _, m := range dead {
		base := store.DeadLetter{RequestID: string(m.Key)}
		for _, h := range m.Headers {
			switch h.Key {
			case "flashsale-source":
				base.Source = string(h.Value)
			case "flashsale-error":
				base.Cause = string(h.Value)
			}
		}
		var e struct {
			Kind  string `json:"kind"`
			Items []struct {
				PromoID string `json:"promoId"`
				Type    int    `json:"type"`
			} `json:"items"`
		}
		_ = json.Unmarshal(m.Value, &e) // what does not parse names no promotion
		base.Kind = e.Kind
		if len(e.Items) == 0 {
			out = append(out, base)
		}
		for _, it := range e.Items {
			l := base
			l.ID = store.ID{PromoID: it.PromoID, Type: it.Type}
			out = append(out, l)
		}
	}
	return out
}
