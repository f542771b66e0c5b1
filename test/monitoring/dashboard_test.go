package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const dashboardPath = "config/grafana/cleanup-operator.json"

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// grafanaVariables are what Grafana puts in place of its own variables
// before it sends a query; the dashboard's variables become a value that
// parses wherever a label value may stand.
var grafanaVariables = map[string]string{
	"__rate_interval": "5m",
	"__interval":      "1m",
	"__range":         "1h",
}

var variable = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}?`)

func expand(expr string) string {
	return variable.ReplaceAllStringFunc(expr, func(v string) string {
		name := variable.FindStringSubmatch(v)[1]
		if d, ok := grafanaVariables[name]; ok {
			return d
		}
		return "x"
	})
}

// TestDashboard checks that every query of the dashboard, and of its
// variables, parses and names only metrics, and labels, the operator
// exports.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, dashboardPath))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("%s: a title and a uid are needed", dashboardPath)
	}
	e := exportedMetrics(t)
	queries := 0
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				queries++
				for _, problem := range checkQuery(expand(tg.Expr), e) {
					t.Errorf("panel %q, query %s: %s\n\t%s", p.Title, tg.RefID, problem, tg.Expr)
				}
			}
		}
	}
	walk(d.Panels)
	if queries == 0 {
		t.Fatalf("%s has no query", dashboardPath)
	}

	labelValues := regexp.MustCompile(`^label_values\(\s*([^,]+?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := fmt.Sprint(v.Query)
		if m, ok := v.Query.(map[string]any); ok {
			q = fmt.Sprint(m["query"])
		}
		sel := labelValues.FindStringSubmatch(q)
		if sel == nil {
			t.Errorf("variable %s: query %q is not label_values(<selector>, <label>)", v.Name, q)
			continue
		}
		for _, problem := range checkQuery(expand(sel[1]), e) {
			t.Errorf("variable %s: %s", v.Name, problem)
		}
		for _, problem := range checkQuery(fmt.Sprintf("count by (%s) (%s)", sel[2], expand(sel[1])), e) {
			t.Errorf("variable %s: %s", v.Name, problem)
		}
	}
}
