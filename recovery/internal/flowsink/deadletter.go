package flowsink

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/flow"
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
