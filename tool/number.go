package tool

// JSON Schema's "integer" is a value, not a spelling: 1.0 and 1e2 are
// integers (draft 2020-12, section 6.1.1), and models do write them. These
// helpers decide it from the number's text, exactly, without big numbers.

// decimalText is a JSON number split into its parts; the value is
// ±0.d₁d₂…dₙ × 10^point, where d is the integer digits followed by the
// fraction digits.
type decimalText struct {
	neg        bool
	intPart    []byte
	frac       []byte
	exp        int  // saturated at ±maxDecidedExp+1
	expOverrun bool // the exponent was beyond what is decided
}

// maxDecidedExp bounds the exponents and fraction lengths decided here:
// beyond them the full validator's arithmetic gives up on the number
// (math/big refuses exponents past 10⁶), so only it may answer.
const maxDecidedExp = 10000

// parseDecimal splits tok, a JSON number (already checked as JSON).
func parseDecimal(tok []byte) decimalText {
	var d decimalText
	i := 0
	if i < len(tok) && tok[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
		i++
	}
	d.intPart = tok[start:i]
	if i < len(tok) && tok[i] == '.' {
		i++
		start = i
		for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
			i++
		}
		d.frac = tok[start:i]
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		neg := false
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			neg = tok[i] == '-'
			i++
		}
		for ; i < len(tok); i++ {
			d.exp = d.exp*10 + int(tok[i]-'0')
			if d.exp > maxDecidedExp {
				d.expOverrun = true
				d.exp = maxDecidedExp + 1
			}
		}
		if neg {
			d.exp = -d.exp
		}
	}
	return d
}

func (d *decimalText) digit(k int) byte {
	if k < len(d.intPart) {
		return d.intPart[k]
	}
	return d.frac[k-len(d.intPart)]
}

// significant returns where the significant digits start and end and the
// decimal point's position relative to their start; zero is start == end.
func (d *decimalText) significant() (start, end, point int) {
	n := len(d.intPart) + len(d.frac)
	for start < n && d.digit(start) == '0' {
		start++
	}
	end = n
	for end > start && d.digit(end-1) == '0' {
		end--
	}
	return start, end, len(d.intPart) + d.exp - start
}

// integral reports whether the JSON number tok has an integer value;
// decided is false for exponents or fractions too long to answer here.
func integral(tok []byte) (yes, decided bool) {
	if isPlainInteger(tok) {
		return true, true
	}
	d := parseDecimal(tok)
	if d.expOverrun || len(d.frac) > maxDecidedExp {
		return false, false
	}
	start, end, point := d.significant()
	return start == end || end-start <= point, true
}

// isPlainInteger reports whether tok is written as an integer: no
// fraction, no exponent.
func isPlainInteger(tok []byte) bool {
	for _, c := range tok {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// maxCanonicalDigits bounds the integers canonicalInt writes out: more
// digits than any Go integer holds, fewer than would let "1e10000" grow
// into ten thousand bytes.
const maxCanonicalDigits = 40

// canonicalInt appends to buf the integer literal of tok ("1.0" is "1",
// "-2.5e1" is "-25") when tok has an integer value of at most
// maxCanonicalDigits digits, and reports whether it did.
func canonicalInt(buf, tok []byte) ([]byte, bool) {
	d := parseDecimal(tok)
	if d.expOverrun || len(d.frac) > maxDecidedExp {
		return buf, false
	}
	start, end, point := d.significant()
	if start == end {
		return append(buf, '0'), true
	}
	if end-start > point || point > maxCanonicalDigits {
		return buf, false
	}
	if d.neg {
		buf = append(buf, '-')
	}
	for k := start; k < end; k++ {
		buf = append(buf, d.digit(k))
	}
	for k := end - start; k < point; k++ {
		buf = append(buf, '0')
	}
	return buf, true
}

// canonicalInts returns data, valid JSON, with every number that has an
// integer value but is not written as one ("1.0", "1e2") rewritten as an
// integer literal, so that encoding/json can decode it into a Go integer,
// and whether it changed anything.
func canonicalInts(data []byte) ([]byte, bool) {
	var out []byte
	last := 0
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			i = skipString(data, i)
		case c == '-' || c >= '0' && c <= '9':
			end, _ := scanNumber(data, i)
			if tok := data[i:end]; !isPlainInteger(tok) {
				if out == nil {
					out = make([]byte, 0, len(data))
				}
				mark := len(out)
				out = append(out, data[last:i]...)
				if o, ok := canonicalInt(out, tok); ok {
					out, last = o, end
				} else {
					out = out[:mark]
				}
			}
			i = end
		default:
			i++
		}
	}
	if last == 0 {
		return data, false
	}
	return append(out, data[last:]...), true
}
