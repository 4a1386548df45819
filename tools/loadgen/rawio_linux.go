//go:build !race

package loadgen

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// socketIO is how a worker reads and writes its connection: here the socket's
// non-blocking reads and writes as raw system calls, waiting for readiness through
// the runtime's poller (and so the deadline) as net.Conn does, but without waking
// the runtime's monitor thread on every call (docs/design.md, "Drills and checker").
// Race-detector builds keep net.Conn (rawio_other.go): its reads and writes tell the
// detector what one side wrote before the other read, which handler tests rely on.
func socketIO(c net.Conn) io.ReadWriter {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return rawSocket{rc}
}

type rawSocket struct{ rc syscall.RawConn }

func (s rawSocket) Read(p []byte) (n int, err error) {
	if len(p) == 0 {
		return 0, nil
	}
	var errno syscall.Errno
	waitErr := s.rc.Read(func(fd uintptr) bool {
		n, errno = rawCall(syscall.SYS_READ, fd, p)
		return errno != syscall.EAGAIN
	})
	switch {
	case waitErr != nil: // the deadline passed, or the connection was closed
		return 0, waitErr
	case errno != 0:
		return 0, errno
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (s rawSocket) Write(p []byte) (n int, err error) {
	var errno syscall.Errno
	waitErr := s.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			var m int
			if m, errno = rawCall(syscall.SYS_WRITE, fd, p[n:]); errno != 0 {
				return errno != syscall.EAGAIN
			}
			n += m
		}
		return true
	})
	switch {
	case waitErr != nil:
		return n, waitErr
	case errno != 0:
		return n, errno
	}
	return n, nil
}

// rawCall is read(2) or write(2) of p on fd, retried when a signal interrupts it.
func rawCall(trap, fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		r, _, errno := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if errno != syscall.EINTR {
			return int(r), errno
		}
	}
}
