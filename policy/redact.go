package policy

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
)

// secretShapes are the forms of common keys and tokens: OpenAI and
// Anthropic keys, Google API keys, GitHub, Slack, Stripe and AWS access
// keys, bearer tokens, JWTs and PEM private keys.
var secretShapes = regexp.MustCompile(`sk-ant-[A-Za-z0-9_-]{16,}` +
	`|sk-(?:proj-)?[A-Za-z0-9_-]{20,}` +
	`|AIza[0-9A-Za-z_-]{30,}` +
	`|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}` +
	`|xox[baprs]-[A-Za-z0-9-]{10,}` +
	`|(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}` +
	`|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b` +
	`|(?i:bearer\s+)[A-Za-z0-9._~+/-]{16,}=*` +
	`|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}` +
	`|-----BEGIN [A-Z ]*PRIVATE KEY-----[^"]*?-----END [A-Z ]*PRIVATE KEY-----`)

// piiShapes are e-mail addresses, phone numbers, and candidates for card
// numbers and IBANs (checked by Luhn and mod 97 before they count).
var (
	emailShape = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)
	// A phone number has a country code, an area code in parentheses, or
	// dashes or dots between its groups: groups of digits with spaces
	// alone are too often other numbers.
	phoneShape = regexp.MustCompile(`\+\d{1,3}[ .-]?\(?\d{1,4}\)?(?:[ .-]?\d{2,4}){2,4}\b` +
		`|\(\d{2,4}\)[ .-]?\d{3,4}[ .-]?\d{3,4}\b|\b\d{3}[.-]\d{3}[.-]\d{4}\b`)
	cardShape = regexp.MustCompile(`\b\d(?:[ -]?\d){12,18}\b`)
	ibanShape = regexp.MustCompile(`\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b`)
)

// secretEnvSuffixes name the environment variables whose values are
// secrets.
var secretEnvSuffixes = []string{"_KEY", "_TOKEN", "_SECRET", "_PASSWORD"}

// Redactor replaces what its matchers find with "[REDACTED:NAME]". It is
// immutable and safe for concurrent use.
type Redactor struct {
	secrets bool
	pii     bool
	values  []string // secret values of the environment, longest first
	custom  []namedPattern
}

type namedPattern struct {
	name string
	re   *regexp.Regexp
}

// Secrets returns the redactor of secrets that agentry applies to
// everything it logs, emits or stores, policy or not: the shapes of
// common keys and tokens, PEM private keys, JWTs, and the values (eight
// characters or more) that the environment holds in variables named
// *_KEY, *_TOKEN, *_SECRET or *_PASSWORD when Secrets is called.
func Secrets() *Redactor {
	r := &Redactor{secrets: true}
	for _, kv := range os.Environ() {
		name, val, _ := strings.Cut(kv, "=")
		if len(val) < 8 {
			continue
		}
		for _, suf := range secretEnvSuffixes {
			if strings.HasSuffix(strings.ToUpper(name), suf) {
				r.values = append(r.values, val)
				if q, _ := json.Marshal(val); string(q[1:len(q)-1]) != val {
					r.values = append(r.values, string(q[1:len(q)-1])) // as it appears inside JSON
				}
				break
			}
		}
	}
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	return r
}

// WithPII returns a copy of r that also redacts personal data: e-mail
// addresses, phone numbers, card numbers that pass the Luhn check and
// IBANs that pass the mod-97 check.
func (r *Redactor) WithPII() *Redactor {
	cp := *r
	cp.pii = true
	return &cp
}

// WithPattern returns a copy of r that also redacts what re matches,
// labelled name.
func (r *Redactor) WithPattern(name string, re *regexp.Regexp) *Redactor {
	cp := *r
	cp.custom = append(append([]namedPattern(nil), r.custom...), namedPattern{name, re})
	return &cp
}

// String returns s with what r finds replaced. A string with nothing to
// redact is returned as it is, without a copy.
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	if r.secrets {
		for _, v := range r.values {
			if strings.Contains(s, v) {
				s = strings.ReplaceAll(s, v, "[REDACTED:secret]")
			}
		}
		if secretShapes.MatchString(s) {
			s = secretShapes.ReplaceAllString(s, "[REDACTED:secret]")
		}
	}
	if r.pii {
		s = replaceChecked(s, cardShape, luhn, "[REDACTED:pii]")
		s = replaceChecked(s, ibanShape, ibanValid, "[REDACTED:pii]")
		s = emailShape.ReplaceAllString(s, "[REDACTED:pii]")
		s = phoneShape.ReplaceAllString(s, "[REDACTED:pii]")
	}
	for _, p := range r.custom {
		s = p.re.ReplaceAllString(s, "[REDACTED:"+p.name+"]")
	}
	return s
}

// Bytes is String for bytes: JSON stays valid JSON, because no match of
// a built-in matcher holds a quote or a backslash of JSON's syntax.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil || len(b) == 0 {
		return b
	}
	s := string(b)
	if out := r.String(s); out != s {
		return []byte(out)
	}
	return b
}

// Found reports whether r finds anything in s.
func (r *Redactor) Found(s string) bool { return r.String(s) != s }

// replaceChecked replaces the matches of re that pass ok.
func replaceChecked(s string, re *regexp.Regexp, ok func(string) bool, with string) string {
	return re.ReplaceAllStringFunc(s, func(m string) string {
		if ok(m) {
			return with
		}
		return m
	})
}

// luhn reports whether the digits of s pass the Luhn check.
func luhn(s string) bool {
	sum, n, double := 0, 0, false
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if double {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
		n++
	}
	return n >= 13 && sum%10 == 0
}

// ibanValid reports whether s is an IBAN whose check digits hold (ISO
// 13616: the number mod 97 is 1).
func ibanValid(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	s = s[4:] + s[:4]
	rem := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			rem = (rem*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			v := int(c-'A') + 10
			rem = (rem*100 + v) % 97
		default:
			return false
		}
	}
	return rem == 1
}
