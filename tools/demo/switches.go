package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/flashsale/platform/client"
	"github.com/flashsale/platform/internal/stack"
)

// showSwitchFlip switches grabs off with bin/configctl, shows a grab answered
// DEGRADED without touching stock, and switches them on again: what on-call does
// when a sale must pause.
func showSwitchFlip(ctx context.Context, st stack.File, pf platform, promoID string) error {
	root, err := stack.Root()
	if err != nil {
		return err
	}
	configctl := func(args ...string) error {
		args = append([]string{"--reason", "demo: a sale paused"}, args...)
		cmd := st.Configctl(ctx, root, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		fmt.Printf("$ FLASHSALE_ONCALL_TOKEN=%s bin/configctl --file %s --api %s %v\n", stack.DevOnCallToken, filepath.Base(st.SwitchesFile), st.Admin, args)
		return cmd.Run()
	}
	grab := func(n int) (told, int) {
		ctx, cancel := context.WithTimeout(ctx, pressTimeout)
		defer cancel()
		ans, err := pf.grab.Grab(ctx, client.GrabRequest{RequestID: fmt.Sprintf("flip-%s-%d", promoID, n), Pin: fmt.Sprintf("flip-buyer-%d", n),
			IP: "10.77.0.1", Items: []client.Item{{PromoID: promoID, Type: 1, Num: 1}}})
		status := http.StatusOK
		var e *client.Error
		if errors.As(err, &e) {
			status = e.StatusCode
		}
		return tell(ans, err), status
	}
	// waitFor polls until a grab answers want: the switch reaches every instance within 1 s.
	waitFor := func(want string) (int, time.Duration, error) {
		start := time.Now()
		for n := 0; ; n++ {
			a, status := grab(n)
			if a.result == want {
				return status, time.Since(start), nil
			}
			if time.Since(start) > 3*time.Second {
				return status, time.Since(start), fmt.Errorf("still %s %d after 3 s, want %s", a.result, status, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := configctl("set", "grabEnabled", "false"); err != nil {
		return fmt.Errorf("switch grabs off: %w", err)
	}
	status, took, err := waitFor("DEGRADED")
	if err != nil {
		return err
	}
	fmt.Printf("grab while switched off: %d %s (in force after %s)\n", status, "DEGRADED", took.Round(10*time.Millisecond))
	if err := configctl("set", "grabEnabled", "true"); err != nil {
		return fmt.Errorf("switch grabs on: %w", err)
	}
	status, took, err = waitFor("GRANTED")
	if err != nil {
		return err
	}
	fmt.Printf("grab switched on again: %d %s (in force after %s)\n", status, "GRANTED", took.Round(10*time.Millisecond))
	return nil
}
