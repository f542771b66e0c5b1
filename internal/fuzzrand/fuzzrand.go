package fuzzrand

import (
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
)

// New returns a generator whose draws read the next eight bytes of data, so
// that a change in the bytes changes the choices near it; past the end, a
// generator seeded by the bytes goes on.
func New(data []byte) *rand.Rand {
	h := fnv.New64a()
	h.Write(data)
	return rand.New(&chooser{data: data, rest: rand.New(rand.NewPCG(h.Sum64(), uint64(len(data))))})
}

// chooser is the source of New.
type chooser struct {
	data []byte
	rest *rand.Rand
}

func (c *chooser) Uint64() uint64 {
	if len(c.data) == 0 {
		return c.rest.Uint64()
	}
	var b [8]byte
	n := copy(b[:], c.data)
	c.data = c.data[n:]
	return binary.LittleEndian.Uint64(b[:])
}
