package docs_test

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// The checks below keep what the pages quote true to the code: log lines,
// admission policies, flags, metrics and reasons. Each returns its problems
// as "file:line: what", so that a test can plant a mismatch and see it
// reported.

// otherFlags are flags the pages quote that belong to neither the manager
// nor the plugin, with whose they are.
var otherFlags = map[string]string{
	"server-side": "kubectl", "force-conflicts": "kubectl", "field-selector": "kubectl",
	"namespace": "kubectl, helm", "create-namespace": "helm", "set": "helm", "values": "helm",
	"reuse-values": "helm", "version": "helm",
	"delete-collection-workers": "kube-apiserver", "max-requests-inflight": "kube-apiserver",
	"max-mutating-requests-inflight": "kube-apiserver",
}

var (
	span          = regexp.MustCompile("`([^`]+)`")
	logBefore     = regexp.MustCompile("(?:log line|logs|log says|logged as)\\s+`([^`]+)`")
	logAfter      = regexp.MustCompile("`([^`]+)`\\s+(?:\\(keys?\\b|is logged)")
	placeholder   = regexp.MustCompile(`\.\.\.|<[^>]+>`)
	policyCount   = regexp.MustCompile(`(?i)\b(one|two|three|four|five|six|seven|eight|nine|ten)\s+(?:ValidatingAdmissionPolicies|admission policies)`)
	admissionName = regexp.MustCompile(`^cleanup-operator-(?:deleting|deletion|delete)[a-z-]*$`)
	quotedFlag    = regexp.MustCompile(`^--([a-z0-9][a-z0-9-]*)`)
	metricName    = regexp.MustCompile(`\bcleanup_[a-z0-9_]+`)
	reasonLike    = regexp.MustCompile(`^[A-Z][A-Za-z]+$`)
	numbers       = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
)

// proseLines returns the lines outside code blocks in order.
func proseLines(md markdown) []int {
	lines := make([]int, 0, len(md.prose))
	for n := range md.prose {
		lines = append(lines, n)
	}
	sort.Ints(lines)
	return lines
}

// tables calls fn for each row of each table of md with the table's header
// cells and the row's cells.
func tables(md markdown, fn func(line int, header, row []string)) {
	var header []string
	prev := -1
	for _, n := range proseLines(md) {
		l := strings.TrimSpace(md.prose[n])
		if !strings.HasPrefix(l, "|") {
			header = nil
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case header == nil || n != prev+1:
			header = cells
		case strings.Trim(strings.Join(cells, ""), "-: ") == "":
			// the separator row
		default:
			fn(n, header, cells)
		}
		prev = n
	}
}

// joinedProse is the prose of md as one string, lines joined by spaces, and
// the line each byte offset starts on.
func joinedProse(md markdown) (string, func(int) int) {
	var b strings.Builder
	var starts, nums []int
	for _, n := range proseLines(md) {
		starts, nums = append(starts, b.Len()), append(nums, n)
		b.WriteString(md.prose[n] + " ")
	}
	return b.String(), func(off int) int {
		i := sort.SearchInts(starts, off+1) - 1
		return nums[max(i, 0)]
	}
}

// checkLogLines: every log line quoted (in a table whose first column is
// `msg`, or in prose as "logs `...`", "log line `...`", "`...` (keys") is
// one the code writes, "..." and "<...>" standing for a variable part.
func checkLogLines(file string, md markdown, f codeFacts) []string {
	var problems []string
	check := func(line int, msg string) {
		if !logLineExists(msg, f) {
			problems = append(problems, fmt.Sprintf("%s:%d: log line %q is written nowhere in the code", file, line, msg))
		}
	}
	tables(md, func(line int, header, row []string) {
		if header[0] == "`msg`" {
			if m := span.FindStringSubmatch(row[0]); m != nil {
				check(line, m[1])
			}
		}
	})
	text, lineOf := joinedProse(md)
	for _, re := range []*regexp.Regexp{logBefore, logAfter} {
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			check(lineOf(m[0]), text[m[2]:m[3]])
		}
	}
	return problems
}

func logLineExists(msg string, f codeFacts) bool {
	parts := placeholder.Split(msg, -1)
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	quoted := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
	for _, code := range f.logMessages {
		codeRe := "^" + strings.ReplaceAll(regexp.QuoteMeta(code), wildcard, ".*") + "$"
		if quoted.MatchString(code) || regexp.MustCompile(codeRe).MatchString(msg) {
			return true
		}
	}
	// The lines of the libraries the manager is built on.
	return len(parts) == 1 && (goModuleHolds("sigs.k8s.io/controller-runtime", msg) || goModuleHolds("k8s.io/client-go", msg))
}

// checkAdmission: a count of admission policies is theirs, a table of them
// lists them all, and every name quoted is one of them or its binding.
func checkAdmission(file string, md markdown, f codeFacts) []string {
	var problems []string
	known := map[string]bool{}
	for _, p := range f.admissionPolicies {
		known[p], known[p+"-binding"] = true, true
	}
	text, lineOf := joinedProse(md)
	for _, m := range policyCount.FindAllStringSubmatchIndex(text, -1) {
		if n := numbers[strings.ToLower(text[m[2]:m[3]])]; n != len(f.admissionPolicies) {
			problems = append(problems, fmt.Sprintf("%s:%d: says %d admission policies; the operator creates %d: %v",
				file, lineOf(m[0]), n, len(f.admissionPolicies), f.admissionPolicies))
		}
	}
	for _, n := range proseLines(md) {
		for _, m := range span.FindAllStringSubmatch(md.prose[n], -1) {
			if admissionName.MatchString(m[1]) && !known[m[1]] {
				problems = append(problems, fmt.Sprintf("%s:%d: %s is no admission policy (or binding) of the operator's", file, n, m[1]))
			}
		}
	}
	listed, first := map[string]bool{}, 0
	tables(md, func(line int, header, row []string) {
		if header[0] == "ValidatingAdmissionPolicy" {
			first = firstLine(first, line)
			if m := span.FindStringSubmatch(row[0]); m != nil {
				listed[m[1]] = true
			}
		}
	})
	for _, p := range f.admissionPolicies {
		if first > 0 && !listed[p] {
			problems = append(problems, fmt.Sprintf("%s:%d: the table of admission policies leaves out %s", file, first, p))
		}
	}
	return problems
}

func firstLine(first, line int) int {
	if first == 0 {
		return line
	}
	return first
}

// checkFlags: every `--flag` quoted is the manager's, the plugin's, or one of
// otherFlags.
func checkFlags(file string, md markdown, f codeFacts) []string {
	var problems []string
	for _, n := range proseLines(md) {
		for _, m := range span.FindAllStringSubmatch(md.prose[n], -1) {
			q := quotedFlag.FindStringSubmatch(m[1])
			if q == nil || f.managerFlags[q[1]] || f.pluginFlags[q[1]] || otherFlags[q[1]] != "" {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s:%d: --%s is a flag of neither the manager nor the plugin", file, n, q[1]))
		}
	}
	return problems
}

// checkMetrics: every cleanup_* name quoted is a metric the operator
// registers (a histogram's series suffixes aside).
func checkMetrics(file string, md markdown, f codeFacts) []string {
	var problems []string
	for _, n := range proseLines(md) {
		for _, m := range span.FindAllStringSubmatch(md.prose[n], -1) {
			for _, idx := range metricName.FindAllStringIndex(m[1], -1) {
				name := m[1][idx[0]:idx[1]]
				if idx[1] < len(m[1]) && m[1][idx[1]] == '.' {
					continue // a file name
				}
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				if !f.metrics[name] && !f.metrics[base] {
					problems = append(problems, fmt.Sprintf("%s:%d: %s is no metric of the operator's", file, n, name))
				}
			}
		}
	}
	return problems
}

// checkReasons: every reason (a CamelCase word) quoted in a table column
// named "reason" (or "... reason") is a reason of api/v1alpha1 or of an
// Event the code emits.
func checkReasons(file string, md markdown, f codeFacts) []string {
	var problems []string
	known := map[string]bool{}
	for _, v := range f.reasons {
		known[v] = true
	}
	for r := range f.eventReasons {
		known[r] = true
	}
	tables(md, func(line int, header, row []string) {
		for i, h := range header {
			if i >= len(row) || !strings.HasSuffix(strings.ToLower(h), "reason") {
				continue
			}
			for _, m := range span.FindAllStringSubmatch(row[i], -1) {
				// Messages and condition statuses share the column.
				if !reasonLike.MatchString(m[1]) || slices.Contains([]string{"True", "False", "Unknown"}, m[1]) {
					continue
				}
				if !known[m[1]] {
					problems = append(problems, fmt.Sprintf("%s:%d: reason %s is neither a condition reason of api/v1alpha1 nor an Event reason of the code", file, line, m[1]))
				}
			}
		}
	})
	return problems
}

// checkDocumented: each name is quoted (as a code span, alone or leading a
// longer one such as `--flag=value`) in one of the pages.
func checkDocumented(what string, names []string, pages map[string]markdown) []string {
	quoted := map[string]bool{}
	for _, md := range pages {
		for _, line := range md.prose {
			for _, m := range span.FindAllStringSubmatch(line, -1) {
				quoted[m[1]] = true
				if k, _, ok := strings.Cut(m[1], "="); ok {
					quoted[k] = true
				}
			}
		}
	}
	var files []string
	for f := range pages {
		files = append(files, f)
	}
	slices.Sort(files)
	var problems []string
	for _, n := range names {
		if !quoted[n] {
			problems = append(problems, fmt.Sprintf("%s %s is documented in none of %v", what, n, files))
		}
	}
	return problems
}
