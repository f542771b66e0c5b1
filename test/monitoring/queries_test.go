package monitoring

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// checkQuery parses a PromQL expression and returns what it names that the
// operator does not export: a metric, a label a selector matches on, or a
// label an aggregation or a vector match names that none of the metrics
// below it carries.
func checkQuery(expr string, e exported) []string {
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return []string{fmt.Sprintf("does not parse: %v", err)}
	}
	var problems []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			problems = append(problems, checkSelector(n, e)...)
		case *parser.AggregateExpr:
			below := labelsBelow(n.Expr, e)
			for _, l := range n.Grouping {
				if !below[l] {
					problems = append(problems, fmt.Sprintf("%s groups by label %q, which none of %s carries", n.Op, l, metricsBelow(n.Expr)))
				}
			}
		case *parser.BinaryExpr:
			if n.VectorMatching == nil {
				break
			}
			below := labelsBelow(n.LHS, e)
			for l := range labelsBelow(n.RHS, e) {
				below[l] = true
			}
			for _, l := range append(slices.Clone(n.VectorMatching.MatchingLabels), n.VectorMatching.Include...) {
				if !below[l] {
					problems = append(problems, fmt.Sprintf("%s matches on label %q, which none of %s carries", n.Op, l,
						append(metricsBelow(n.LHS), metricsBelow(n.RHS)...)))
				}
			}
		}
		return nil
	})
	return problems
}

// checkSelector checks a selector's metric and the labels it matches on.
func checkSelector(vs *parser.VectorSelector, e exported) []string {
	name := selectorName(vs)
	if name == "" {
		return []string{fmt.Sprintf("selector %s names no metric", vs)}
	}
	have, ok := e[name]
	if !ok {
		return []string{fmt.Sprintf("metric %s is not exported", name)}
	}
	var problems []string
	for _, m := range vs.LabelMatchers {
		if m.Name != labels.MetricName && !have[m.Name] {
			problems = append(problems, fmt.Sprintf("metric %s has no label %q (it has %s)", name, m.Name, sortedKeys(have)))
		}
	}
	return problems
}

func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// labelsBelow are the labels of the metrics an expression selects.
func labelsBelow(n parser.Node, e exported) map[string]bool {
	out := map[string]bool{}
	parser.Inspect(n, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			for l := range e[selectorName(vs)] {
				out[l] = true
			}
			// absent() returns the labels of its selector's equality matchers.
			for _, m := range vs.LabelMatchers {
				if m.Type == labels.MatchEqual && m.Name != labels.MetricName {
					out[m.Name] = true
				}
			}
		}
		return nil
	})
	return out
}

func metricsBelow(n parser.Node) []string {
	var out []string
	parser.Inspect(n, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, selectorName(vs))
		}
		return nil
	})
	return out
}

func sortedKeys(m map[string]bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}
