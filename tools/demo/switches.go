package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/flashsale/platform/internal/stack"
	"github.com/flashsale/platform/tools/loadgen"
)

// showSwitchFlip switches grabs off with bin/configctl, shows a grab answered
// DEGRADED without touching stock, and switches them on again: what on-call does
// when a sale must pause.
func showSwitchFlip(ctx context.Context, st stack.File, client *http.Client, token, promoID string) error {
	root, err := stack.Root()
	if err != nil {
		return err
	}
	configctl := func(args ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(root, "bin/configctl"), append([]string{"--file", st.SwitchesFile}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		fmt.Printf("$ bin/configctl --file %s %v\n", filepath.Base(st.SwitchesFile), args)
		return cmd.Run()
	}
	grab := func(n int) loadgen.Answer {
		return loadgen.Do(ctx, client, st.Grab, loadgen.Call{Method: "POST", Path: "/v1/grab", Token: token, Body: map[string]any{
			"requestId": fmt.Sprintf("flip-%s-%d", promoID, n), "pin": fmt.Sprintf("flip-buyer-%d", n), "ip": "10.77.0.1",
			"items": []map[string]any{{"promoId": promoID, "type": 1, "num": 1}}}})
	}
	// waitFor polls until a grab answers want: the switch reaches every instance within 1 s.
	waitFor := func(want string) (loadgen.Answer, time.Duration, error) {
		start := time.Now()
		for n := 0; ; n++ {
			a := grab(n)
			if a.Result == want {
				return a, time.Since(start), nil
			}
			if time.Since(start) > 3*time.Second {
				return a, time.Since(start), fmt.Errorf("still %s %d after 3 s, want %s", a.Result, a.Status, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := configctl("set", "grabEnabled", "false"); err != nil {
		return fmt.Errorf("switch grabs off: %w", err)
	}
	a, took, err := waitFor("DEGRADED")
	if err != nil {
		return err
	}
	fmt.Printf("grab while switched off: %d %s (in force after %s)\n", a.Status, a.Result, took.Round(10*time.Millisecond))
	if err := configctl("set", "grabEnabled", "true"); err != nil {
		return fmt.Errorf("switch grabs on: %w", err)
	}
	a, took, err = waitFor("GRANTED")
	if err != nil {
		return err
	}
	fmt.Printf("grab switched on again: %d %s (in force after %s)\n", a.Status, a.Result, took.Round(10*time.Millisecond))
	return nil
}
