package main

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/flashsale/platform/configcenter"
)

// setKey returns doc with key set to value, validated as the services would.
// An empty doc starts from the defaults the services run with.
func setKey(doc []byte, key, value string) ([]byte, error) {
	m, err := asMap(doc)
	if err != nil {
		return nil, err
	}
	var v any
	if strings.HasPrefix(key, "shardAddrs.") { // a failover: host:port, or - for the flags' address
		return setShardAddr(m, strings.TrimPrefix(key, "shardAddrs."), value)
	}
	if listKeys[key] && (strings.HasPrefix(value, "+") || strings.HasPrefix(value, "-")) {
		if v, err = editList(key, m[key], value); err != nil {
			return nil, err
		}
	} else if v, err = decodeJSON([]byte(value)); err != nil {
		return nil, fmt.Errorf("VALUE %q is not JSON (try true, 0.5, 200 or [\"A_1\"]): %w", value, err)
	}
	path := strings.Split(key, ".")
	at := m
	for _, p := range path[:len(path)-1] {
		sub, ok := at[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			at[p] = sub
		}
		at = sub
	}
	at[path[len(path)-1]] = v
	return encodeChecked(m, key, value)
}

// setShardAddr points shard at addr (host:port), or back at the address its
// flags name when addr is "-".
func setShardAddr(m map[string]any, shard, addr string) ([]byte, error) {
	key := "shardAddrs." + shard
	addrs, ok := m["shardAddrs"].(map[string]any)
	if !ok {
		addrs = map[string]any{}
	}
	if addr == "-" {
		delete(addrs, shard)
	} else {
		addrs[shard] = addr
	}
	if len(addrs) == 0 {
		delete(m, "shardAddrs")
	} else {
		m["shardAddrs"] = addrs
	}
	return encodeChecked(m, key, addr)
}

// encodeChecked encodes the edited document and validates it as the services would.
func encodeChecked(m map[string]any, key, value string) ([]byte, error) {
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode document: %w", err)
	}
	out = append(out, '\n')
	if _, err := configcenter.Parse(out); err != nil {
		return nil, fmt.Errorf("not published: %s=%s: %w", key, value, err)
	}
	return out, nil
}

// asMap decodes the document for editing; numbers keep their text.
func asMap(doc []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		sw := configcenter.Default()
		sw.BlockedPromotions = []string{}
		doc, _ = json.Marshal(sw)
	}
	v, err := decodeJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("the document in force is not JSON (repair it with put): %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the document in force is not a JSON object (repair it with put)")
	}
	return m, nil
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the value")
	}
	return v, nil
}

// listKeys are the switches that +ENTRY and -ENTRY edit one entry at a time.
var listKeys = map[string]bool{"blockedPromotions": true, "blockedPins": true, "blockedIps": true}

// editList adds (+ENTRY) or removes (-ENTRY) one entry of the list key.
func editList(key string, cur any, op string) (any, error) {
	var list []any
	switch c := cur.(type) {
	case nil:
	case []any:
		list = slices.Clone(c)
	default:
		return nil, fmt.Errorf("%s in force is not a list (repair it with put)", key)
	}
	id := op[1:]
	at := slices.Index(list, any(id))
	switch {
	case op[0] == '+' && at < 0:
		list = append(list, id)
	case op[0] == '-' && at >= 0:
		list = slices.Delete(list, at, at+1)
	}
	if list == nil {
		list = []any{}
	}
	return list, nil
}

// printDiff prints the switches that differ between two documents, one per line.
func printDiff(w io.Writer, from, to []byte) {
	a, b := flatten(from), flatten(to)
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var names []string
	for k := range keys {
		if a[k] != b[k] {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		fmt.Fprintln(w, "  no switch differs")
		return
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(w, "  %s: %s -> %s\n", k, orAbsent(a[k]), orAbsent(b[k]))
	}
}

// flatten maps dotted keys to compact JSON values; a document that is not a JSON
// object shows as one pseudo-key holding its text.
func flatten(doc []byte) map[string]string {
	out := map[string]string{}
	if len(bytes.TrimSpace(doc)) == 0 {
		return out
	}
	v, err := decodeJSON(doc)
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		out["(document)"] = strings.TrimSpace(string(doc))
		return out
	}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
				continue
			}
			b, _ := json.Marshal(v)
			out[prefix+k] = string(b)
		}
	}
	walk("", m)
	return out
}

func orAbsent(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}
