package validate

import (
	"encoding/json"
	"os"
	"strings"
)

// DashboardDir holds the Grafana dashboards, one JSON file each.
const DashboardDir = "deploy/observability/grafana/dashboards"

// GrafanaProvisioning holds the datasource and dashboard-provider files Grafana loads.
const GrafanaProvisioning = "deploy/observability/grafana/provisioning"

// grafanaVars are what Grafana puts in for its built-in variables, for parsing and
// running a panel's query outside Grafana.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$__interval", "15s",
	"$__range", "1h",
	"${datasource}", "prometheus",
)

// ExpandGrafanaVars replaces Grafana's built-in variables in a query.
func ExpandGrafanaVars(expr string) string { return grafanaVars.Replace(expr) }

// PanelQuery is one query of one panel.
type PanelQuery struct {
	Dashboard, Panel, RefID, Expr string
}

type rawPanel struct {
	ID      int        `json:"id"`
	Type    string     `json:"type"`
	Title   string     `json:"title"`
	Panels  []rawPanel `json:"panels"`
	GridPos struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

type rawDashboard struct {
	UID        string     `json:"uid"`
	Title      string     `json:"title"`
	Panels     []rawPanel `json:"panels"`
	Templating struct {
		List []struct {
			Type    string `json:"type"`
			Name    string `json:"name"`
			Query   string `json:"query"`
			Current struct {
				Value any `json:"value"`
			} `json:"current"`
		} `json:"list"`
	} `json:"templating"`
}

func loadRawDashboard(path string) (rawDashboard, []byte, error) {
	var d rawDashboard
	data, err := os.ReadFile(path)
	if err != nil {
		return d, nil, err
	}
	return d, data, json.Unmarshal(data, &d)
}

// allPanels flattens rows (collapsed rows keep their panels inside).
func allPanels(ps []rawPanel) []rawPanel {
	var out []rawPanel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// DashboardQueries is every panel query of every dashboard, Grafana variables expanded.
func DashboardQueries() ([]PanelQuery, error) {
	files, err := Files(DashboardDir, ".json")
	if err != nil {
		return nil, err
	}
	var out []PanelQuery
	for _, f := range files {
		d, _, err := loadRawDashboard(Path(f))
		if err != nil {
			return nil, err
		}
		for _, p := range allPanels(d.Panels) {
			for _, t := range p.Targets {
				out = append(out, PanelQuery{Dashboard: d.UID, Panel: p.Title, RefID: t.RefID, Expr: ExpandGrafanaVars(t.Expr)})
			}
		}
	}
	return out, nil
}

// DashboardProvider is Grafana's dashboard provisioning file, strictly.
type DashboardProvider struct {
	APIVersion int `yaml:"apiVersion"`
	Providers  []struct {
		Name                  string `yaml:"name"`
		OrgID                 int    `yaml:"orgId"`
		Folder                string `yaml:"folder"`
		FolderUID             string `yaml:"folderUid"`
		Type                  string `yaml:"type"`
		DisableDeletion       bool   `yaml:"disableDeletion"`
		AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
		UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
		Options               struct {
			Path                      string `yaml:"path"`
			FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
		} `yaml:"options"`
	} `yaml:"providers"`
}

// dashboardProviderPath is where Grafana's provider looks for dashboard files.
func dashboardProviderPath(errs *Errs) string {
	data, err := os.ReadFile(Path(GrafanaProvisioning, "dashboards", "flashsale.yml"))
	if err != nil {
		errs.Addf("%v", err)
		return ""
	}
	var dp DashboardProvider
	if err := StrictYAML(data, &dp); err != nil {
		errs.Addf("grafana dashboard provisioning: %v", err)
		return ""
	}
	if dp.APIVersion != 1 || len(dp.Providers) != 1 || dp.Providers[0].Type != "file" || dp.Providers[0].Options.Path == "" {
		errs.Addf("grafana dashboard provisioning: want apiVersion 1 and one file provider with a path")
		return ""
	}
	return dp.Providers[0].Options.Path
}
