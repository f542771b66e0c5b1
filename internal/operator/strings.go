package operator

import (
	"strings"
	"sync"
)

// maxSharedStrings bounds the table of shared strings: room for the
// namespaces of a fleet past one replica's reach (10,000 clusters) and the
// few values of everything else a work holds.
const maxSharedStrings = 1 << 15

// maxSharedLength is the longest string shared: a label value's limit.
// Longer ones (an annotation holding a document) are each work's own.
const maxSharedLength = 63

// sharedStrings is the table the cache's works share their few-valued
// strings through (internWork). It keeps what it holds alive, unlike
// package unique, whose table each garbage collection empties and the next
// decoded works fill again (about 20 CPU-s at 200,000 works). Full, it
// starts afresh: strings of namespaces long gone cannot crowd out the
// fleet's, and a work holding a dropped copy keeps it until it is decoded
// again.
var sharedStrings = &stringTable{max: maxSharedStrings}

// stringTable hands out one copy of each string it is given.
type stringTable struct {
	mu  sync.Mutex
	max int
	m   map[string]string
}

// share returns the table's copy of s, which it makes when s is new.
func (t *stringTable) share(s string) string {
	if s == "" || len(s) > maxSharedLength {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m[s]; ok {
		return v
	}
	if t.m == nil || len(t.m) >= t.max {
		t.m = make(map[string]string, 1024)
	}
	s = strings.Clone(s) // not a slice of a larger decoded buffer
	t.m[s] = s
	return s
}
