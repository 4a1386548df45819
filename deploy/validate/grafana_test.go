package validate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// The dashboard must show these (issue: grabs by result, latency, Kafka send errors and
// rollbacks, per-shard Redis latency, flow-sink lag, fences, config version).
var dashboardMustUse = []string{
	"flashsale_grab_grabs_total",
	"flashsale_grab_grab_duration_seconds_bucket",
	"flashsale_grab_kafka_send_errors_total",
	"flashsale_grab_rollbacks_total",
	"flashsale_grab_redis_pipeline_duration_seconds_bucket",
	"flashsale_sink_consumer_lag_messages",
	"flashsale_grab_shard_fenced",
	"flashsale_config_document_info",
}

func TestDashboardsMatchGrafanaSchema(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	files, err := Files(DashboardDir, ".json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards under %s: %v", DashboardDir, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(Path(f))
		if err != nil {
			t.Fatal(err)
		}
		if err := strictDashboard(data); err != nil {
			t.Errorf("%s does not match Grafana's dashboard schema:\n%s", f, err)
		}
	}
}

func TestDashboardLayoutAndDatasource(t *testing.T) {
	files, _ := Files(DashboardDir, ".json")
	uids := map[string]string{}
	for _, f := range files {
		d, _, err := loadRawDashboard(Path(f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var errs Errs
		if d.UID == "" || d.Title == "" {
			errs.Addf("uid and title are required")
		}
		if other, dup := uids[d.UID]; dup {
			errs.Addf("uid %q also used by %s", d.UID, other)
		}
		uids[d.UID] = f
		var dsVar string
		for _, v := range d.Templating.List {
			if v.Type == "datasource" {
				dsVar = v.Name
				if v.Query != "prometheus" {
					errs.Addf("variable %s selects %q datasources, want prometheus", v.Name, v.Query)
				}
				if v.Current.Value != ProvisionedDatasourceUID(t) {
					errs.Addf("variable %s defaults to %v; the provisioned datasource uid is %q", v.Name, v.Current.Value, ProvisionedDatasourceUID(t))
				}
			}
		}
		if dsVar == "" {
			errs.Addf("no datasource variable: panels would be bound to one Grafana's datasource uid")
		}
		ids := map[int]bool{}
		type rect struct{ x, y, w, h int }
		var placed []rect
		var names []string
		for _, p := range allPanels(d.Panels) {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if p.ID <= 0 || ids[p.ID] {
				errs.Addf("%s: id must be positive and unique", where)
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				errs.Addf("%s: gridPos %+v outside the 24-column grid", where, g)
			}
			r := rect{g.X, g.Y, g.W, g.H}
			for i, o := range placed {
				if r.x < o.x+o.w && o.x < r.x+r.w && r.y < o.y+o.h && o.y < r.y+r.h {
					errs.Addf("%s overlaps %s", where, names[i])
				}
			}
			placed, names = append(placed, r), append(names, where)
			if p.Type == "row" {
				continue
			}
			if p.Title == "" {
				errs.Addf("%s: no title", where)
			}
			if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${"+dsVar+"}" {
				errs.Addf("%s: datasource must be {type: prometheus, uid: ${%s}}", where, dsVar)
			}
			if len(p.Targets) == 0 {
				errs.Addf("%s: no query", where)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] || tg.Expr == "" {
					errs.Addf("%s: every target needs a unique refId and an expr", where)
				}
				refs[tg.RefID] = true
			}
		}
		if err := errs.Err(); err != nil {
			t.Errorf("%s:\n%v", f, err)
		}
	}
}

func TestDashboardQueriesUseRealMetrics(t *testing.T) {
	metrics := scanMetrics(t)
	q := NewQueries(metrics)
	queries, err := DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	var used []string
	for _, pq := range queries {
		names, err := q.Check(pq.Expr)
		if err != nil {
			t.Errorf("%s / %q / %s: %s\n%v", pq.Dashboard, pq.Panel, pq.RefID, pq.Expr, err)
		}
		used = append(used, names...)
	}
	for _, m := range dashboardMustUse {
		if !slices.Contains(used, m) {
			t.Errorf("no dashboard panel shows %s", m)
		}
	}
	if t.Failed() {
		t.Logf("metrics the services define:\n%s", describe(metrics))
	}
}

// strictDashboard decodes a dashboard with the SDK's strict decoder (unknown fields,
// wrong types, and each panel's options and field config by its plugin's schema) and
// validates it.
func strictDashboard(data []byte) error {
	//lint:ignore SA1019 the dashboard is a v1 (classic) dashboard, which this type describes
	var d dashboard.Dashboard
	if err := d.UnmarshalJSONStrict(data); !noErrors(err) {
		return errors.New(buildErrors(err))
	}
	if err := d.Validate(); !noErrors(err) {
		return errors.New(buildErrors(err))
	}
	return nil
}

// noErrors: the SDK returns an empty BuildErrors, a non-nil error, when all is well.
func noErrors(err error) bool {
	var errs cog.BuildErrors
	if errors.As(err, &errs) {
		return len(errs) == 0
	}
	return err == nil
}

// The schema check is not a formality: each of these breaks is refused.
func TestDashboardSchemaCheckRefusesBadDashboards(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	data, err := os.ReadFile(Path(DashboardDir, "flashsale-overview.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(d map[string]any){
		"unknown top-level field": func(d map[string]any) { d["refreshEvery"] = "10s" },
		"schemaVersion a string":  func(d map[string]any) { d["schemaVersion"] = "39" },
		"unknown timeseries option": func(d map[string]any) {
			firstOfType(d, "timeseries")["options"].(map[string]any)["legendMode"] = "table"
		},
		"stat option of wrong type": func(d map[string]any) {
			firstOfType(d, "stat")["options"].(map[string]any)["wideLayout"] = "yes"
		},
		"unknown prometheus query field": func(d map[string]any) {
			firstOfType(d, "timeseries")["targets"].([]any)[0].(map[string]any)["query"] = "up"
		},
	} {
		var d map[string]any
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatal(err)
		}
		edit(d)
		bad, _ := json.Marshal(d)
		if strictDashboard(bad) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func firstOfType(d map[string]any, typ string) map[string]any {
	for _, p := range d["panels"].([]any) {
		if pm := p.(map[string]any); pm["type"] == typ {
			return pm
		}
	}
	panic("no panel of type " + typ)
}

// buildErrors spells out the SDK's error list, whose own message can be empty.
func buildErrors(err error) string {
	var errs cog.BuildErrors
	if errors.As(err, &errs) {
		var b strings.Builder
		for _, e := range errs {
			fmt.Fprintf(&b, "  %s: %s\n", e.Path, e.Message)
		}
		return b.String()
	}
	return err.Error()
}
