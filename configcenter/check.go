package configcenter

// Check validates doc as Follow would before applying it: the parser's rules and
// the servers this instance allows shardAddrs to name. A document Check refuses
// is one every service would reject whole, so a writer refuses it before
// publishing it.
func (h *Holder) Check(doc []byte) (*Snapshot, error) {
	snap, err := Parse(doc)
	if err != nil {
		return nil, err
	}
	if err := h.admits(snap); err != nil {
		return nil, err
	}
	return snap, nil
}

// MD5 is the md5 of a document as the stores, the metrics and GET /v1/switches name
// its version.
func MD5(doc []byte) string { return md5Hex(doc) }
