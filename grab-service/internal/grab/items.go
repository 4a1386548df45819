package grab

import (
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/lua"
)

// flowItems is the flow event items of the request's items whose units the groups
// hold, in request order, each with the shard they come from (its stock bucket's
// for a bucketed promotion): the ring was asked once, by groups. envs, when not
// nil, is what each group's script answered its items took or gave back of an
// envelope pool (envs[g][k] for group g's k-th key; see grabEnvelopes): a pool
// item then carries its amount and parts.
func flowItems(items []Item, gs []group, envs [][]lua.Envelope) []flow.Item {
	shard := make([]int, len(items))
	for i := range shard {
		shard[i] = -1
	}
	var env []lua.Envelope // by item, made only when an item is a pool's
	for gi, g := range gs {
		for k, i := range g.idx {
			if !g.holdsStock(k) {
				continue
			}
			shard[i] = g.shard
			if gi < len(envs) {
				if e := envelopeAt(envs[gi], k); e.IsPool() {
					if env == nil {
						env = make([]lua.Envelope, len(items))
					}
					env[i] = e
				}
			}
		}
	}
	out := make([]flow.Item, 0, len(items))
	for i, it := range items {
		if shard[i] < 0 {
			continue
		}
		fi := flow.Item{PromoID: it.PromoID, Type: it.Type, Num: it.Num, Shard: shard[i]}
		if it.buckets > 1 {
			fi.Bucket, fi.Buckets, fi.NoIP = it.bucket, it.buckets, it.noIP
		}
		if env != nil {
			fi.Amount, fi.Parts = env[i].Amount, env[i].Parts
		}
		out = append(out, fi)
	}
	return out
}

// grabEnvelopes is what each group's take handed out of envelope pools, by group
// as flowItems takes it; nil when no item of the grab is a pool's (an ordinary
// grab allocates nothing for it).
func grabEnvelopes(replies []lua.GrabReply) [][]lua.Envelope {
	var out [][]lua.Envelope
	for i, r := range replies {
		if r.Envelopes == nil {
			continue
		}
		if out == nil {
			out = make([][]lua.Envelope, len(replies))
		}
		out[i] = r.Envelopes
	}
	return out
}

// envelopeAt is the envelope a script answered for its k-th item: the zero
// Envelope (no pool) when it answered none.
func envelopeAt(envs []lua.Envelope, k int) lua.Envelope {
	if k < len(envs) {
		return envs[k]
	}
	return lua.Envelope{}
}
