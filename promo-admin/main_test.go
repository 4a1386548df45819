package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

// Outside local mode there are no default credentials: promo-admin refuses to
// start until the three roles' tokens are set.
func TestRefusesToStartWithoutTokensOutsideLocalMode(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		admin, viewer, oncall, missing string
	}{
		{"", "", "", "FLASHSALE_ADMIN_TOKEN"},
		{"admin-token-0123456789", "", "", "FLASHSALE_VIEWER_TOKEN"},
		{"", "viewer-token-0123456789", "", "FLASHSALE_ADMIN_TOKEN"},
		{"change-me-admin", "viewer-token-0123456789", "", "FLASHSALE_ADMIN_TOKEN"}, // the .env.example placeholder
		{"admin-token-0123456789", "viewer-token-0123456789", "", "FLASHSALE_ONCALL_TOKEN"},
		{"admin-token-0123456789", "viewer-token-0123456789", "change-me-oncall", "FLASHSALE_ONCALL_TOKEN"},
	} {
		t.Setenv("FLASHSALE_ADMIN_TOKEN", c.admin)
		t.Setenv("FLASHSALE_VIEWER_TOKEN", c.viewer)
		t.Setenv("FLASHSALE_ONCALL_TOKEN", c.oncall)
		err := run(logger, []string{"--listen", "127.0.0.1:0"})
		if err == nil || !strings.Contains(err.Error(), c.missing) {
			t.Errorf("admin %q viewer %q: want an error naming %s, have %v", c.admin, c.viewer, c.missing, err)
		}
	}
}

func TestRefusesUnknownFlags(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := run(logger, []string{"--no-such-flag"}); err == nil {
		t.Error("want an error for an unknown flag")
	}
}

// With approval required, the approver's token is required too.
func TestRequiresTheApproverTokenWithApproval(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv("FLASHSALE_ADMIN_TOKEN", "admin-token-0123456789")
	t.Setenv("FLASHSALE_VIEWER_TOKEN", "viewer-token-0123456789")
	t.Setenv("FLASHSALE_ONCALL_TOKEN", "oncall-token-0123456789")
	t.Setenv("FLASHSALE_APPROVER_TOKEN", "")
	for _, args := range [][]string{{"--require-approval"}, nil} {
		if args == nil {
			t.Setenv("FLASHSALE_REQUIRE_APPROVAL", "1")
		}
		err := run(logger, append([]string{"--listen", "127.0.0.1:0"}, args...))
		if err == nil || !strings.Contains(err.Error(), "FLASHSALE_APPROVER_TOKEN") {
			t.Errorf("approval on (%v): want an error naming FLASHSALE_APPROVER_TOKEN, have %v", args, err)
		}
	}
}
