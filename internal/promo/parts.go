package promo

import "strings"

// Part letters of a bucketed grab (q.lua): the stock, the pin's limit and counter,
// the ip's limit and counter. An ordinary item is all three. PartNoIP, on every
// part of a grab, says the grab counts the ip nowhere, which q.lua allows only while
// the promotion has no ip limit (else it answers IP_PART_NEEDED).
const (
	PartStock = "s"
	PartPin   = "p"
	PartIP    = "i"
	PartNoIP  = "n"
	PartAll   = PartStock + PartPin + PartIP
)

// HoldsStock reports whether a take of part letters (an empty part: an ordinary
// item) holds units of stock, and so is a unit of the record that owes a CANCEL
// when given back; a part of a pin's or an ip's count alone is not.
func HoldsStock(part string) bool { return part == "" || strings.Contains(part, PartStock) }
