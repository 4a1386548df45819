package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flashsale/platform/configcenter"
)

// writeSwitches replaces the switches file atomically (write a temporary file in
// the same directory, then rename), as on-call tooling must: grab-service polls the
// file and must never read half a document.
func writeSwitches(path string, doc []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".switches-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(doc); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

func encodeSwitches(s configcenter.Switches) []byte {
	if s.BlockedPromotions == nil {
		s.BlockedPromotions = []string{}
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	return append(b, '\n')
}

// readSwitches reads the switches file in force: its bytes, to restore it after the
// drill, and its switches. A failure is recorded on out and ok is false.
func readSwitches(path string, out *outcome) (orig []byte, sw configcenter.Switches, ok bool) {
	orig, err := os.ReadFile(path)
	if err != nil {
		out.fail("read the switches file: %v", err)
		return nil, sw, false
	}
	snap, err := configcenter.Parse(orig)
	if err != nil {
		out.fail("the switches file in force does not parse: %v", err)
		return nil, sw, false
	}
	return orig, snap.Switches, true
}
