package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// roundOf names a run's round when there is more than one.
func roundOf(round, rounds int) string {
	if rounds == 1 {
		return ""
	}
	return fmt.Sprintf(", round %d", round)
}

// medianRun is the run of median time (of an even number, the faster of
// the two middle ones): the tables show it.
func medianRun(runs []teardownResult) teardownResult {
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b teardownResult) int { return int(a.took - b.took) })
	return sorted[(len(sorted)-1)/2]
}

// median is the median of values (of an even number, the lower middle).
func median[T cmp.Ordered](values []T) T {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	return sorted[(len(sorted)-1)/2]
}

// printRounds says, for each contender, its times in round order, their
// median, and its time over the first contender's in the same round, each
// round and their median: the contenders took turns, so a round's ratio
// is measured on the same minute of the machine.
func printRounds(out io.Writer, runs [][]teardownResult) {
	fmt.Fprintf(out, "\n| contender | time, each round | median | CPU, median | over %s, each round | median |\n|---|---|---|---|---|---|\n", runs[0][0].c.name)
	for _, rs := range runs {
		var times, ratios []string
		var took, cpu []time.Duration
		var ratio []float64
		for r, res := range rs {
			times = append(times, fmt.Sprintf("%.2f", res.took.Seconds()))
			took = append(took, res.took)
			cpu = append(cpu, res.cpu.total())
			x := res.took.Seconds() / runs[0][r].took.Seconds()
			ratio = append(ratio, x)
			ratios = append(ratios, fmt.Sprintf("%.2f", x))
		}
		fmt.Fprintf(out, "| %s | %s | %.2f s | %.2f s | %s | %.2f |\n", rs[0].c.name, strings.Join(times, ", "),
			median(took).Seconds(), median(cpu).Seconds(), strings.Join(ratios, ", "), median(ratio))
	}
	fmt.Fprintln(out, "\nThe tables below show each contender's run of median time.")
}
