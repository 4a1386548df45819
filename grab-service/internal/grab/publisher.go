package grab

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/flashsale/platform/internal/flow"
)

// Publisher commits flow events: Publish returns nil only once every event is
// acknowledged by the record (Kafka with acks=all, or MySQL while degraded).
// main wires publish.Router, which routes by the kafkaDegrade switch.
type Publisher interface {
	Publish(ctx context.Context, events ...flow.Event) error
}

// newEventID is unique per event; deduplication in the record is on
// (requestId, kind, promotion), so a re-sent event may carry a new id.
func newEventID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
