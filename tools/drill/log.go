package main

import (
	"io"
	"os"
	"path/filepath"
)

// openLog opens the drill log at path for appending; the writer also copies it to
// stderr when verbose.
func openLog(path string, verbose bool) (*os.File, io.Writer, error) {
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, err
	}
	if verbose {
		return f, io.MultiWriter(f, os.Stderr), nil
	}
	return f, io.MultiWriter(f), nil
}
