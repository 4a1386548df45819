package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// entry is one published version in the append-only history log (JSON lines).
// Neither the file nor the SDK keeps past versions, so configctl keeps its own.
type entry struct {
	At      time.Time       `json:"at"`
	User    string          `json:"user"`
	Store   string          `json:"store"`
	Change  string          `json:"change"`
	PrevMD5 string          `json:"prevMd5"`
	MD5     string          `json:"md5"`
	Content json.RawMessage `json:"content"` // the whole document, compacted onto the line
	// Prev is the document it replaced, as text (it may be one that no longer
	// parsed), so a diff never depends on who published the version before.
	Prev string `json:"prev,omitempty"`
}

// appendHistory adds one line; O_APPEND keeps concurrent writers' lines whole.
func appendHistory(path string, e entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode history entry: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("history %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("history %s: %w", path, err)
	}
	_, err = f.Write(append(line, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("history %s: %w", path, err)
	}
	return nil
}

// readHistory returns every entry, oldest first; a missing log is empty.
func readHistory(path string) ([]entry, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	defer f.Close()
	var out []entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("history %s line %d: %w", path, n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	return out, nil
}
