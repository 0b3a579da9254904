// Package ids makes the ids of runs and sessions.
package ids

import "math/rand/v2"

// New returns prefix_ and 16 hex digits from the runtime's
// cryptographically seeded generator: unique across processes, and cheap.
func New(prefix string) string {
	var b [32]byte
	return string(b[:fill(b[:], prefix)])
}

// fill writes prefix, '_' and 16 hex digits into b, and returns how many
// bytes it wrote. b has room: prefixes are short.
func fill(b []byte, prefix string) int {
	n := copy(b, prefix)
	b[n] = '_'
	n++
	x := rand.Uint64()
	const digits = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		b[n+i] = digits[x&0xf]
		x >>= 4
	}
	return n + 16
}
