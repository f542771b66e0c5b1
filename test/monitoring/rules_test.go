package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// root is the repository root.
const root = "../.."

const (
	rulePath    = "config/prometheus/rule.yaml"
	ruleTests   = "config/prometheus/tests"
	runbookPage = "docs/operations/troubleshooting.md"
	runbookBase = "https://github.com/fleetops-dev/cleanup-operator/blob/main/" + runbookPage
)

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// prometheusRule reads the PrometheusRule the operator ships.
func prometheusRule(t *testing.T) (spec []byte, groups ruleGroups) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rulePath))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       map[string]any `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(data, &obj); err != nil {
		t.Fatalf("%s: %v", rulePath, err)
	}
	if obj.APIVersion != "monitoring.coreos.com/v1" || obj.Kind != "PrometheusRule" {
		t.Fatalf("%s: want a monitoring.coreos.com/v1 PrometheusRule, got %s %s", rulePath, obj.APIVersion, obj.Kind)
	}
	if spec, err = yaml.Marshal(obj.Spec); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(spec, &groups); err != nil {
		t.Fatalf("%s: spec: %v", rulePath, err)
	}
	return spec, groups
}

func alerts(t *testing.T) []rule {
	_, groups := prometheusRule(t)
	var out []rule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert (%s): add it here when it is wanted", g.Name, r.Record)
				continue
			}
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no alert", rulePath)
	}
	return out
}

// TestAlertQueries checks that every alert's expression parses and names
// only metrics, and labels, the operator exports.
func TestAlertQueries(t *testing.T) {
	e := exportedMetrics(t)
	for _, a := range alerts(t) {
		for _, p := range checkQuery(a.Expr, e) {
			t.Errorf("alert %s: %s", a.Alert, p)
		}
	}
}

// TestAlertRunbooks checks that every alert has a severity, a summary, and
// a runbook_url that links a section of docs/operations/troubleshooting.md.
func TestAlertRunbooks(t *testing.T) {
	anchors := markdownAnchors(t, filepath.Join(root, runbookPage))
	for _, a := range alerts(t) {
		if s := a.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
			t.Errorf("alert %s: severity %q, want critical, warning or info", a.Alert, s)
		}
		if a.Annotations["summary"] == "" || a.Annotations["description"] == "" {
			t.Errorf("alert %s: a summary and a description are needed", a.Alert)
		}
		url := a.Annotations["runbook_url"]
		page, anchor, _ := strings.Cut(url, "#")
		if page != runbookBase {
			t.Errorf("alert %s: runbook_url %q does not link %s", a.Alert, url, runbookBase)
			continue
		}
		if want := "alert-" + strings.ToLower(a.Alert); anchor != want {
			t.Errorf("alert %s: runbook_url anchor %q, want %q (a heading \"Alert: %s\")", a.Alert, anchor, want, a.Alert)
		}
		if !anchors[anchor] {
			t.Errorf("alert %s: %s has no section #%s", a.Alert, runbookPage, anchor)
		}
	}
}

// markdownAnchors are the anchors a page's headings get, as GitHub makes them.
func markdownAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		out[slug] = true
	}
	return out
}

// ruleTest is the part of a promtool test file this test reads.
type ruleTest struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestAlertRules runs the rules' unit tests (config/prometheus/tests) in
// promtool, built from hack/tools/promtool, after checking that each alert
// has a test where it fires and one where it stays quiet.
func TestAlertRules(t *testing.T) {
	spec, _ := prometheusRule(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, ruleTests, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule tests in %s (%v)", ruleTests, err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rt ruleTest
		if err := yaml.Unmarshal(data, &rt); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !slices.Equal(rt.RuleFiles, []string{"rules.yaml"}) {
			t.Errorf("%s: rule_files must be [rules.yaml], the spec of %s", f, rulePath)
		}
		for _, tc := range rt.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
		name := filepath.Base(f)
		names = append(names, name)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range alerts(t) {
		if !fires[a.Alert] {
			t.Errorf("alert %s: no test in %s fires it", a.Alert, ruleTests)
		}
		if !quiet[a.Alert] {
			t.Errorf("alert %s: no test in %s shows it quiet", a.Alert, ruleTests)
		}
	}

	promtool := buildPromtool(t)
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
	run("check", "rules", "rules.yaml")
	run(append([]string{"test", "rules"}, names...)...)
}

// buildPromtool builds promtool at the version hack/tools/promtool pins.
func buildPromtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p // a promtool built already, e.g. by CI's cache
	}
	out := filepath.Join(t.TempDir(), "promtool")
	cmd := exec.Command("go", "build", "-o", out, "github.com/prometheus/prometheus/cmd/promtool")
	cmd.Dir = filepath.Join(root, "hack/tools/promtool")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building promtool in hack/tools/promtool: %v\n%s", err, b)
	}
	return out
}
