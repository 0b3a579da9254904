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

// Seeded returns prefix_ and 16 hex digits derived from seed: the same
// seed and prefix give the same id, for deterministic runs.
func Seeded(prefix string, seed int64) string {
	var b [32]byte
	n := copy(b[:], prefix)
	b[n] = '_'
	n++
	x := uint64(seed) ^ hashPrefix(prefix)
	// splitmix64: well spread from a counter-like seed.
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	const digits = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		b[n+i] = digits[x&0xf]
		x >>= 4
	}
	return string(b[:n+16])
}

func hashPrefix(s string) uint64 {
	h := uint64(14695981039346656037) // FNV-1a
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// Derive mixes seed with parts (each ended by a zero byte, so that
// ("ab", "c") and ("a", "bc") differ): the seed of one seeded run among
// others of the same seed, for Seeded.
func Derive(seed int64, parts ...string) int64 {
	h := uint64(14695981039346656037) // FNV-1a
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			h ^= uint64(p[i])
			h *= 1099511628211
		}
		h *= 1099511628211 // the zero byte: h ^= 0, then the multiply
	}
	return seed ^ int64(h)
}
