// Package progress is the progress bar of recovery's long-running commands
// (rebuild, verify): written to stderr while stdout keeps the report.
package progress

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// New is a bar of total things (named by unit) written to w, or nil when w is nil
// or there is nothing to count. A nil bar is what callers check, so --quiet and
// tests pass no writer.
func New(w io.Writer, total int, description, unit string) *progressbar.ProgressBar {
	if w == nil || total == 0 {
		return nil
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(description),
		progressbar.OptionShowCount(),
		progressbar.OptionSetItsString(unit),
		progressbar.OptionShowIts(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
}
