package docs_test

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// checks are the checks every page passes.
var checks = map[string]func(string, markdown, codeFacts) []string{
	"log lines":          checkLogLines,
	"admission policies": checkAdmission,
	"flags":              checkFlags,
	"metrics":            checkMetrics,
	"reasons":            checkReasons,
}

// TestDocsQuoteTheCode runs every check on the README and every page of
// docs/: what they quote is what the code writes, serves and names.
func TestDocsQuoteTheCode(t *testing.T) {
	f := readCodeFacts(t)
	if len(f.logMessages) < 20 || len(f.reasons) < 20 || len(f.metrics) < 15 || len(f.admissionPolicies) < 4 ||
		len(f.managerFlags) < 20 || len(f.pluginFlags) < 5 {
		t.Fatalf("read too little of the code to check anything: %d log lines, %d reasons, %d metrics, %d admission policies, %d manager and %d plugin flags",
			len(f.logMessages), len(f.reasons), len(f.metrics), len(f.admissionPolicies), len(f.managerFlags), len(f.pluginFlags))
	}
	for _, file := range markdownFiles(t) {
		md := parseMarkdown(t, file)
		for _, name := range slices.Sorted(maps.Keys(checks)) {
			for _, p := range checks[name](file, md, f) {
				t.Errorf("%s: %s", name, p)
			}
		}
	}
}

// TestCodeIsDocumented: every manager flag is in the configuration page,
// every metric in the metrics reference, every reason in the API or Events
// reference.
func TestCodeIsDocumented(t *testing.T) {
	f := readCodeFacts(t)
	for _, p := range documentedProblems(t, f) {
		t.Error(p)
	}
}

func documentedProblems(t *testing.T, f codeFacts) []string {
	t.Helper()
	page := func(files ...string) map[string]markdown {
		out := map[string]markdown{}
		for _, file := range files {
			out[file] = parseMarkdown(t, filepath.ToSlash(filepath.Join("docs", file)))
		}
		return out
	}
	var flags []string
	for name := range f.managerFlags {
		if name != "h" && name != "help" {
			flags = append(flags, "--"+name)
		}
	}
	slices.Sort(flags)
	reasons := slices.Sorted(maps.Values(f.reasons))
	reasons = slices.Compact(reasons)
	return slices.Concat(
		checkDocumented("flag", flags, page("operations/configuration.md")),
		checkDocumented("metric", slices.Sorted(maps.Keys(f.metrics)), page("reference/metrics.md")),
		checkDocumented("reason", reasons, page("reference/api.md", "reference/events.md")),
	)
}

// planted is a page with one mismatch of each kind beside true quotes.
const planted = "# Planted\n\n" +
	"| `msg` | keys | meaning |\n| --- | --- | --- |\n" +
	"| `cluster governed` | `cluster` | true |\n" +
	"| `cluster adopted by a ghost` | `cluster` | planted |\n\n" +
	"At start the operator logs `optional CRD installed: <what> on`, and it logs `policy vanished into thin air`.\n" +
	"It creates two ValidatingAdmissionPolicies: `cleanup-operator-deleting-cluster` and `cleanup-operator-deleting-everything`.\n\n" +
	"| ValidatingAdmissionPolicy | refuses |\n| --- | --- |\n| `cleanup-operator-deleting-cluster` | new works |\n\n" +
	"Run the manager with `--leader-elect` and `--turbo-mode=true`; the plugin with `--dry-run`.\n" +
	"Watch `cleanup_clusters_in_cleanup` and `cleanup_clusters_vaporised_total`; the sample is `cleanup_v1alpha1_cleanuppolicy.yaml`.\n\n" +
	"| status | reason |\n| --- | --- |\n| `True` | `Completed` |\n| `False` | `Vaporised` |\n"

// TestPlantedMismatchesAreCaught runs the checks on a page with a planted
// mismatch of each kind, and the documented checks with code that has one
// more flag, metric and reason than the pages: each must be reported, and
// nothing true may be.
func TestPlantedMismatchesAreCaught(t *testing.T) {
	f := readCodeFacts(t)
	md := parseMarkdownText(t, "planted.md", []byte(planted))
	want := map[string][]string{
		"log lines":          {"cluster adopted by a ghost", "policy vanished into thin air"},
		"admission policies": {"says 2 admission policies", "cleanup-operator-deleting-everything", "leaves out cleanup-operator-deleting-work"},
		"flags":              {"--turbo-mode"},
		"metrics":            {"cleanup_clusters_vaporised_total"},
		"reasons":            {"reason Vaporised"},
	}
	for name, check := range checks {
		got := check("planted.md", md, f)
		for _, w := range want[name] {
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, w) }) {
				t.Errorf("%s: the planted %q was not reported; got %q", name, w, got)
			}
		}
		for _, p := range got {
			for _, truth := range []string{"cluster governed", "optional CRD installed", "--leader-elect", "--dry-run", "cleanup_clusters_in_cleanup", "cleanup_v1alpha1", "Completed"} {
				if strings.Contains(p, truth) {
					t.Errorf("%s: a true quote was reported: %s", name, p)
				}
			}
		}
	}

	more := f
	more.managerFlags = maps.Clone(f.managerFlags)
	more.managerFlags["turbo-mode"] = true
	more.metrics = maps.Clone(f.metrics)
	more.metrics["cleanup_clusters_vaporised_total"] = true
	more.reasons = maps.Clone(f.reasons)
	more.reasons["VaporisedReason"] = "Vaporised"
	got := documentedProblems(t, more)
	for _, w := range []string{"flag --turbo-mode", "metric cleanup_clusters_vaporised_total", "reason Vaporised"} {
		if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, w+" ") }) {
			t.Errorf("the undocumented %s was not reported; got %q", w, got)
		}
	}
}
