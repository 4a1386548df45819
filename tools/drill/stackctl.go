package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/flashsale/platform/internal/stack"
)

// stackCtl starts, kills and restarts parts of the local stack, always through what
// `make up` recorded (.run/stack.json) and deploy/local/stack.sh.
type stackCtl struct {
	file string // .run/stack.json
	root string // repository root
	log  io.Writer
	st   stack.File
}

func newStackCtl(file, root string, log io.Writer) (*stackCtl, error) {
	s := &stackCtl{file: file, root: root, log: log}
	return s, s.reload()
}

func (s *stackCtl) reload() error {
	st, err := stack.Load(s.file)
	if err != nil {
		return err
	}
	s.st = st
	return nil
}

// signature is what a component's command line must contain, so a recycled pid is
// never signalled.
func signature(name string) string {
	switch {
	case strings.HasPrefix(name, "redis-"), strings.HasPrefix(name, "replica-"):
		return "redis-server"
	case name == "kafka":
		return "kafka-broker"
	case name == "flow-sink":
		return "recovery sink"
	}
	return name
}

func cmdline(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// kill signals the recorded process of component name and returns its pid.
func (s *stackCtl) kill(name string, sig syscall.Signal) (int, error) {
	if err := s.reload(); err != nil {
		return 0, err
	}
	pid := s.st.Pids[name]
	if pid <= 0 {
		return 0, fmt.Errorf("%s is not running (stack file pid 0)", name)
	}
	if cl := cmdline(pid); !strings.Contains(cl, signature(name)) {
		return 0, fmt.Errorf("%s: pid %d runs %q, not %s; not signalled", name, pid, cl, signature(name))
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return 0, fmt.Errorf("signal %s (pid %d): %w", name, pid, err)
	}
	fmt.Fprintf(s.log, "drill: sent %s to %s (pid %d)\n", sig, name, pid)
	return pid, nil
}

// waitGone waits until pid has exited, up to timeout: gone, or a zombie (a dying
// process loses its command line before it closes its sockets, so only the zombie
// state says its ports are closed).
func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// The state follows the command name in parentheses, which may hold spaces.
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// up runs `deploy/local/stack.sh up`, which restarts whatever stopped (and
// rebuilds a shard that came back empty, unless env holds FLASHSALE_NO_REBUILD=1).
func (s *stackCtl) up(ctx context.Context, env ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.root, "deploy/local/stack.sh"), "up")
	cmd.Dir = s.root
	cmd.Env = append(append(os.Environ(), "STACK_BUILT=1"), env...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("stack.sh up: %w", err)
	}
	return s.reload()
}

// ready reports whether base answers 200 on /readyz.
func ready(base string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(base + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func waitReady(base string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !ready(base) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s", base, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// waitClosed waits until addr refuses connections (a killed process's threads may
// still be closing its sockets when its state already reads zombie).
func waitClosed(addr string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for tcpOpen(addr) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// tcpOpen reports whether addr accepts a connection.
func tcpOpen(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// instance is an extra grab-service started by the drill (the failover drill's
// second instance), with the stack instance's flags but its own address.
type instance struct {
	cmd  *exec.Cmd
	base string
	done chan error
}

// startGrabInstance starts another grab-service like the stack's own.
func (s *stackCtl) startGrabInstance() (*instance, error) {
	if err := s.reload(); err != nil {
		return nil, err
	}
	pid := s.st.Pids["grab-service"]
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("read the stack grab-service's command line (pid %d): %v", pid, err)
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	// Its own ports for the API and for the ops listener (/metrics, the probes),
	// which the stack's instance holds.
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	ops, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args = withFlag(withFlag(args, "listen", addr), "ops-listen", ops)
	logf, err := os.OpenFile(filepath.Join(s.root, ".run/logs/drill-grab-service-2.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = s.root
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start a second grab-service: %w", err)
	}
	in := &instance{cmd: cmd, base: "http://" + addr, done: make(chan error, 1)}
	go func() { in.done <- cmd.Wait(); logf.Close() }()
	if err := waitReady(in.base, 60*time.Second); err != nil {
		in.stop(syscall.SIGKILL, time.Second)
		return nil, err
	}
	fmt.Fprintf(s.log, "drill: second grab-service pid %d on %s\n", cmd.Process.Pid, addr)
	return in, nil
}

// freeAddr is a loopback address no one listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// withFlag sets --name to value in a command line: in place when it is there (as
// --name value or -name value), else appended.
func withFlag(args []string, name, value string) []string {
	for i := 1; i < len(args)-1; i++ {
		if args[i] == "--"+name || args[i] == "-"+name {
			args[i+1] = value
			return args
		}
	}
	return append(args, "--"+name, value)
}

// stop signals the instance and waits up to grace for it to exit (then kills it).
// It returns the exit error (nil for a clean exit) and whether it exited in time.
func (in *instance) stop(sig syscall.Signal, grace time.Duration) (error, bool) {
	if in == nil || in.cmd.Process == nil {
		return nil, true
	}
	_ = in.cmd.Process.Signal(sig)
	select {
	case err := <-in.done:
		in.cmd.Process = nil
		return err, true
	case <-time.After(grace):
		_ = in.cmd.Process.Kill()
		err := <-in.done
		in.cmd.Process = nil
		return err, false
	}
}
