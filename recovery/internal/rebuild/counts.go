package rebuild

import (
	"hash/maphash"
	"strings"
)

// counts sums a promotion's flow rows per pin (or per ip). A million rows add
// into a table of a hundred thousand keys, and what that costs is mostly waiting
// for memory, one row after another: so the rows of a batch are first hashed and
// their slots read (touch), the reads of many rows in flight at once, and only
// then added (add), their slots in cache. A slot holds the upper half of its key's
// hash and the index of the key and its sum, which lie side by side in keys and
// sums; each key is copied once, when first seen, not kept alive with its row.
type counts struct {
	seed  maphash.Seed
	slots []uint64 // hash>>32<<32 | index+1, 0 when free; a power of two long, at most half full
	keys  []string
	sums  []int64
	sink  uint64 // what touch read, kept so that the reads stay
}

func newCounts() *counts {
	return &counts{seed: maphash.MakeSeed(), slots: make([]uint64, 1024)}
}

func (c *counts) hash(key string) uint64 { return maphash.String(c.seed, key) }

// touch reads the slot where the key of hash h is looked for first.
func (c *counts) touch(h uint64) { c.sink += c.slots[h&uint64(len(c.slots)-1)] }

// add adds n to key's sum; h is its hash.
func (c *counts) add(key string, h uint64, n int64) {
	mask := uint64(len(c.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := c.slots[i]
		if s == 0 {
			c.keys = append(c.keys, strings.Clone(key))
			c.sums = append(c.sums, n)
			c.slots[i] = h>>32<<32 | uint64(len(c.keys))
			if 2*len(c.keys) > len(c.slots) {
				c.grow()
			}
			return
		}
		if s>>32 == h>>32 && c.keys[uint32(s)-1] == key {
			c.sums[uint32(s)-1] += n
			return
		}
	}
}

// grow doubles the slots and places every key again.
func (c *counts) grow() {
	c.slots = make([]uint64, 2*len(c.slots))
	mask := uint64(len(c.slots) - 1)
	for j, key := range c.keys {
		h := c.hash(key)
		i := h & mask
		for c.slots[i] != 0 {
			i = (i + 1) & mask
		}
		c.slots[i] = h>>32<<32 | uint64(j+1)
	}
}
