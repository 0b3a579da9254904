package ids

// Two returns two ids, as New would, made in one allocation: a session's
// and its run's.
func Two(prefixA, prefixB string) (a, b string) {
	var buf [64]byte
	n := fill(buf[:], prefixA)
	m := fill(buf[n:], prefixB)
	s := string(buf[:n+m])
	return s[:n], s[n:]
}
