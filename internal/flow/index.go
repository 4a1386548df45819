package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flashsale/platform/internal/promo"
)

// A request index entry's body hash is a hex SHA-256 or shorter.
const maxBodyHash = 128

// ErrBadIndex: what a request index key holds is no entry the grab path wrote.
var ErrBadIndex = errors.New("request index entry does not parse")

// DecodeRequestIndex reads a request index entry back from Redis and checks it as
// the grab path checks a request: whoever can write the shard could otherwise steer
// a cancel at shards and buckets that do not exist (FuzzDecodeRequestIndex).
func DecodeRequestIndex(raw []byte) (RequestIndex, error) {
	var x RequestIndex
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&x); err != nil || dec.More() {
		return RequestIndex{}, ErrBadIndex
	}
	if err := x.validate(); err != nil {
		return RequestIndex{}, fmt.Errorf("%w: %v", ErrBadIndex, err)
	}
	return x, nil
}

func (x RequestIndex) validate() error {
	switch {
	case len(x.BodyHash) > maxBodyHash:
		return fmt.Errorf("body hash longer than %d bytes", maxBodyHash)
	case !promo.ValidPin(x.Pin):
		return errors.New("pin is not one the grab path accepts")
	case len(x.IP) > maxIP:
		return fmt.Errorf("ip longer than %d bytes", maxIP)
	case len(x.Items) == 0 || len(x.Items) > promo.MaxItemsPerGrab:
		return fmt.Errorf("1 to %d items", promo.MaxItemsPerGrab)
	case x.ClaimedMs < 0 || x.HoldUntilMs < 0:
		return errors.New("negative time")
	}
	return validateItems(x.Items)
}
