//go:build !linux || race

package loadgen

import (
	"io"
	"net"
)

// socketIO is how a worker reads and writes its connection: net.Conn itself
// outside Linux and under the race detector (rawio_linux.go says why Linux
// gets raw system calls, and why the detector does not).
func socketIO(c net.Conn) io.ReadWriter { return c }
