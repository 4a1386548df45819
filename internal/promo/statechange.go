package promo

// StateChange is one change of a promotion's sale state, as a script recorded it
// in its shard's state outbox (StateOutboxKey). Seq orders the changes of one
// promotion; Member is the outbox entry, removed once published.
type StateChange struct {
	Key    string // the promotion hash key, Key
	State  string // SOLD_OUT, RESTOCKED, STOPPED, ENDED or DELETED (lua's State* values)
	Seq    int64
	AtMs   int64 // when it happened, unix ms (the caller's clock)
	Member string
}
