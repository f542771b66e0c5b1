// Command shardsim simulates the sharding design of
// docs/developer/sharding.md on a synthetic fleet: how evenly two ways of
// assigning ManagedClusters to replicas spread the fleet and a storm of
// deletions, and how many clusters change replica when the replica count
// changes. It builds nothing the operator runs; the design is on paper.
//
//	go run ./hack/shardsim [-clusters 10000] [-regions 20] [-storm-region 3]
package main

import (
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// assign maps a shard key to one of n replicas.
type assign func(key string, n int) int

// modulo is FNV-1a of the key modulo the replica count.
func modulo(key string, n int) int {
	return int(hash64(key) % uint64(n))
}

// rendezvous gives the key to the replica with the highest hash of
// (replica, key): highest random weight hashing. A change of n moves only
// the keys that the added or removed replica wins or held.
func rendezvous(key string, n int) int {
	best, bestScore := 0, uint64(0)
	for r := range n {
		if s := hash64(fmt.Sprintf("%d/%s", r, key)); r == 0 || s > bestScore {
			best, bestScore = r, s
		}
	}
	return best
}

func hash64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return mix(h.Sum64())
}

// mix is a 64-bit finaliser: FNV-1a alone spreads similar short names
// poorly in its low bits.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// fleet names clusters as hubs often do: region, then a number.
func fleet(clusters, regions int) (names []string, region []int) {
	for i := range clusters {
		r := i % regions
		names = append(names, fmt.Sprintf("r%02d-cluster-%05d", r, i/regions))
		region = append(region, r)
	}
	return names, region
}

// spread counts the keys each of n replicas gets.
func spread(keys []string, n int, a assign) []int {
	counts := make([]int, n)
	for _, k := range keys {
		counts[a(k, n)]++
	}
	return counts
}

// imbalance is the largest replica's share over the ideal share, minus one.
func imbalance(counts []int) float64 {
	total, most := 0, 0
	for _, c := range counts {
		total += c
		most = max(most, c)
	}
	if total == 0 {
		return 0
	}
	return float64(most)*float64(len(counts))/float64(total) - 1
}

// moved is the share of keys whose replica differs between n and m replicas.
func moved(keys []string, n, m int, a assign) float64 {
	changed := 0
	for _, k := range keys {
		if a(k, n) != a(k, m) {
			changed++
		}
	}
	return float64(changed) / float64(len(keys))
}

func main() {
	clusters := flag.Int("clusters", 10000, "ManagedClusters in the fleet")
	regions := flag.Int("regions", 20, "regions the clusters are named after")
	storm := flag.Int("storm-region", 3, "region whose clusters are all deleted at once")
	flag.Parse()
	report(os.Stdout, *clusters, *regions, *storm)
}

func report(w io.Writer, clusters, regions, storm int) {
	names, region := fleet(clusters, regions)
	var stormKeys []string
	for i, n := range names {
		if region[i] == storm {
			stormKeys = append(stormKeys, n)
		}
	}
	fmt.Fprintf(w, "%d clusters in %d regions; storm: region %d (%d clusters)\n\n",
		clusters, regions, storm, len(stormKeys))
	fmt.Fprintln(w, "| replicas | assignment | fleet imbalance | storm imbalance | moved going to n+1 |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for _, n := range []int{2, 3, 4, 8} {
		for _, a := range []struct {
			name string
			fn   assign
		}{{"modulo", modulo}, {"rendezvous", rendezvous}} {
			fmt.Fprintf(w, "| %d | %s | %.1f%% | %.1f%% | %.1f%% |\n", n, a.name,
				100*imbalance(spread(names, n, a.fn)), 100*imbalance(spread(stormKeys, n, a.fn)),
				100*moved(names, n, n+1, a.fn))
		}
	}
}
