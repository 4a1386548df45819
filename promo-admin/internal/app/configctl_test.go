package app_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// configctl sends its changes through promo-admin: the change lands in the store
// under the on-call token's name in the switch history, a stale one exits 3, a
// wrong token is refused and publishes nothing, and history reads promo-admin's.
// configctl is built from its source and run as on-call runs it.
func TestConfigctlThroughPromoAdmin(t *testing.T) {
	t.Parallel()
	bin := buildConfigctl(t)
	file := filepath.Join(t.TempDir(), "switches.json")
	e := admintest.Start(t, admintest.Options{Switches: configcenter.FileSource{Path: file, Interval: 20 * time.Millisecond}})
	run := func(token string, args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"--file", file, "--api", e.Server.URL}, args...)...)
		cmd.Env = append(os.Environ(), "FLASHSALE_ONCALL_TOKEN="+token, "USER=someone")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String()
	}
	if code, out := run(admintest.OnCallToken, "--reason", "drill", "set", "kafkaDegrade", "true"); code != 0 ||
		!strings.Contains(out, "by "+admintest.OnCallName) {
		t.Fatalf("set through promo-admin: exit %d\n%s", code, out)
	}
	page := switchHistory(t, e, 10)
	if len(page.Entries) != 1 || page.Entries[0].Actor.Name != admintest.OnCallName || page.Entries[0].Reason != "drill" ||
		page.Entries[0].Outcome != store.SwitchApplied {
		t.Fatalf("history after the set: %+v", page)
	}
	snap, err := configcenter.ReadSwitches(t.Context(), configcenter.FileStore{Path: file})
	if err != nil || !snap.KafkaDegrade {
		t.Fatalf("in the store: %+v %v", snap, err)
	}
	if code, out := run(admintest.OnCallToken, "set", "--if-md5", "0123456789abcdef0123456789abcdef", "grabEnabled", "false"); code != 3 {
		t.Errorf("a stale set: exit %d, want 3\n%s", code, out)
	}
	if code, out := run(admintest.ViewerToken, "set", "grabEnabled", "false"); code != 1 || !strings.Contains(out, "FORBIDDEN") {
		t.Errorf("a viewer's token: exit %d\n%s", code, out)
	}
	if code, out := run(admintest.OnCallToken, "set", "degradeRateFactor", "7"); code != 1 {
		t.Errorf("an invalid value: exit %d\n%s", code, out)
	}
	if after := switchHistory(t, e, 10); len(after.Entries) != 1 {
		t.Errorf("refused changes were recorded: %+v", after)
	}
	testenv.Within(t, testenv.SwitchDeadline(), "the change in force", func() bool { return readSwitches(t, e).Switches.KafkaDegrade })
	if code, out := run(admintest.OnCallToken, "history"); code != 0 || !strings.Contains(out, admintest.OnCallName) ||
		!strings.Contains(out, "kafkaDegrade: false -> true") {
		t.Errorf("history: exit %d\n%s", code, out)
	}
}

// buildConfigctl builds configcenter/cmd/configctl into the test's directory.
func buildConfigctl(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "configctl")
	cmd := exec.Command("go", "build", "-o", bin, "./configcenter/cmd/configctl")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build configctl: %v\n%s", err, out)
	}
	return bin
}
