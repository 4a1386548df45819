package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

var alertName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]+$`)

func loadRules(t *testing.T) RuleFile {
	data, err := os.ReadFile(Path(AlertRules))
	if err != nil {
		t.Fatal(err)
	}
	var rf RuleFile
	if err := StrictYAML(data, &rf); err != nil {
		t.Fatalf("%s: %v", AlertRules, err)
	}
	return rf
}

func TestAlertRules(t *testing.T) {
	rf := loadRules(t)
	q := NewQueries(scanMetrics(t))
	anchors := runbookAnchors(t)
	seen := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			var errs Errs
			if !alertName.MatchString(r.Alert) || seen[r.Alert] {
				errs.Addf("alert name must be unique CamelCase")
			}
			seen[r.Alert] = true
			if _, err := q.Check(r.Expr); err != nil {
				errs.Addf("expr: %v", err)
			}
			if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
				errs.Addf("severity must be critical, warning or info, is %q", r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" {
				errs.Addf("no summary annotation")
			}
			want := runbookURLPrefix + "alert-" + strings.ToLower(r.Alert)
			if r.Annotations["runbook_url"] != want {
				errs.Addf("runbook_url is %q, want %q", r.Annotations["runbook_url"], want)
			} else if !anchors[strings.TrimPrefix(want, runbookURLPrefix)] {
				errs.Addf("deploy/RUNBOOK.md has no heading \"Alert: %s\"", r.Alert)
			}
			if err := errs.Err(); err != nil {
				t.Errorf("%s / %s:\n%v", g.Name, r.Alert, err)
			}
		}
	}
	if len(seen) == 0 {
		t.Fatal("no alerts")
	}
}

// Every alert has a promtool test in which it fires.
func TestEveryAlertHasAFiringTest(t *testing.T) {
	data, err := os.ReadFile(Path(AlertTests))
	if err != nil {
		t.Fatal(err)
	}
	var rt RuleTests
	if err := yaml.Unmarshal(data, &rt); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			}
		}
	}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if !fires[r.Alert] {
				t.Errorf("%s: no test in %s expects it to fire", r.Alert, AlertTests)
			}
		}
	}
}

// Every runbook section about an alert belongs to an alert that exists.
func TestRunbookAlertSectionsExist(t *testing.T) {
	alerts := map[string]bool{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			alerts["alert-"+strings.ToLower(r.Alert)] = true
		}
	}
	for a := range runbookAnchors(t) {
		if strings.HasPrefix(a, "alert-") && !alerts[a] {
			t.Errorf("deploy/RUNBOOK.md has a section %q for no alert of %s", a, AlertRules)
		}
	}
}

// The compose and Kubernetes configs scrape the same jobs, and the rules only match
// jobs that exist.
func TestScrapeJobsAgree(t *testing.T) {
	jobs := func(path string) []string {
		data, err := os.ReadFile(Path(path))
		if err != nil {
			t.Fatal(err)
		}
		var sj ScrapeJobs
		if err := yaml.Unmarshal(data, &sj); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range sj.ScrapeConfigs {
			out = append(out, s.JobName)
		}
		return out
	}
	compose, k8s := jobs(PromConfig), jobs(PromConfigK8s)
	for _, j := range []string{"grab-service", "promo-admin", "flow-sink"} {
		if !slices.Contains(compose, j) || !slices.Contains(k8s, j) {
			t.Errorf("job %s must be scraped by both %s %v and %s %v", j, PromConfig, compose, PromConfigK8s, k8s)
		}
	}
	jobRe := regexp.MustCompile(`(?:^|[{,\s])job(?:=~|=)"([^"]+)"`)
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			for _, m := range jobRe.FindAllStringSubmatch(r.Expr, -1) {
				for _, j := range strings.Split(m[1], "|") {
					if !slices.Contains(compose, j) || !slices.Contains(k8s, j) {
						t.Errorf("%s matches job %q, which one of the configs does not scrape", r.Alert, j)
					}
				}
			}
		}
	}
}

func run(t *testing.T, name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Dir = Root()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func TestPromtool(t *testing.T) {
	promtool := tool(t, "PROMTOOL", "promtool")
	run(t, promtool, "check", "config", PromConfig, PromConfigK8s)
	run(t, promtool, "check", "rules", AlertRules)
	run(t, promtool, "test", "rules", AlertTests)
}

// A real Prometheus loads the compose config with the rules, evaluates every rule
// without error, and runs every dashboard query.
func TestPrometheusLoadsRulesAndDashboardQueries(t *testing.T) {
	bin := tool(t, "PROMETHEUS", "prometheus")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--config.file="+Path(PromConfig),
		"--storage.tsdb.path="+t.TempDir(),
		"--web.listen-address="+addr,
		"--log.level=warn")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", logs.String())
		}
	}()
	base := "http://" + addr
	get := func(path string, v any) error {
		resp, err := http.Get(base + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s: %s", path, resp.Status, body)
		}
		return json.Unmarshal(body, v)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	want := 0
	for _, g := range loadRules(t).Groups {
		want += len(g.Rules)
	}
	type ruleState struct {
		Name, Health, LastError string
		LastEvaluation          time.Time
	}
	var rules struct {
		Data struct {
			Groups []struct {
				Name  string
				Rules []ruleState
			}
		}
	}
	// Rules are evaluated every evaluation_interval (5s): wait for one round.
	for {
		if err := get("/api/v1/rules", &rules); err != nil {
			t.Fatal(err)
		}
		var all []ruleState
		for _, g := range rules.Data.Groups {
			all = append(all, g.Rules...)
		}
		evaluated := len(all) == want
		for _, r := range all {
			evaluated = evaluated && !r.LastEvaluation.IsZero() && r.LastEvaluation.Year() > 2000
		}
		if evaluated {
			for _, r := range all {
				if r.Health != "ok" {
					t.Errorf("rule %s: health %s: %s", r.Name, r.Health, r.LastError)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus loaded %d rules (want %d) or has not evaluated them yet", len(all), want)
		}
		time.Sleep(200 * time.Millisecond)
	}

	queries, err := DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	for _, pq := range queries {
		var res struct {
			Status, Error string
		}
		if err := get("/api/v1/query?query="+url.QueryEscape(pq.Expr), &res); err != nil || res.Status != "success" {
			t.Errorf("%s / %q / %s: prometheus refused %s: %v %s", pq.Dashboard, pq.Panel, pq.RefID, pq.Expr, err, res.Error)
		}
	}
}
