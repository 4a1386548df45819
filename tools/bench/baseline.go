package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// The HTTP baselines run in a process of their own, as grab-service does, so the
// load generator's process holds the same share of the cores in both runs:
// `bench --serve bare|lock` serves on a free loopback port, prints its URL and
// stops when its standard input closes (the parent exits or is done with it).

// serveBaseline is the child's side.
func serveBaseline(kind, dsn string, conns int) error {
	var h http.Handler
	switch kind {
	case "bare":
		h = bareHandler()
	case "lock":
		db, err := sqlx.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		db.SetMaxOpenConns(conns)
		db.SetMaxIdleConns(conns)
		h = lockHandler(db)
	default:
		return fmt.Errorf("--serve %q: want bare or lock", kind)
	}
	base, stop, err := serve(h)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Println(base)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// spawnBaseline is the parent's side: it starts the child and returns its URL and
// a function that stops it (the child's stdin closes; a kill by pid if it lingers).
func spawnBaseline(ctx context.Context, kind, dsn string, conns int) (string, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(exe, "--serve", kind, "--serve-dsn", dsn, "--serve-conns", fmt.Sprint(conns))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill() // the child this function started, by its pid
			<-done
		}
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case base := <-line:
		if !strings.HasPrefix(base, "http://127.0.0.1:") {
			stop()
			return "", nil, fmt.Errorf("%s baseline did not start (said %q)", kind, base)
		}
		return base, stop, nil
	case <-time.After(10 * time.Second):
		stop()
		return "", nil, fmt.Errorf("%s baseline did not start in 10s", kind)
	case <-ctx.Done():
		stop()
		return "", nil, ctx.Err()
	}
}
