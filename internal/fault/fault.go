// Package fault is the one way the services let a test stop them at a named
// point, as a killed process would stop there.
package fault

// Hook is called at a named point; an error stops the caller right there. The
// zero Hook never fires, so production code calls At unconditionally.
type Hook func(point string) error

// At runs the hook at point, if one is set.
func (h Hook) At(point string) error {
	if h == nil {
		return nil
	}
	return h(point)
}
