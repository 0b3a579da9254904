package policy

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/agentry/agentry/event"
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

// secretMarks are strings every secret shape holds: text without any of
// them needs no regular expression (which would cost a pooled matcher,
// and a pass over the whole text). They are as long as the shapes allow,
// so that words ("thought", "right") do not hold one.
// "earer" stands for Bearer and bearer; the rest of the case-insensitive
// word is left to the expression.
var secretMarks = []string{"sk-", "AIza", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "sk_", "rk_", "AKIA", "ASIA", "earer", "EARER", "eyJ", "-----BEGIN"}

// markStarts holds, for each byte, the marks that begin with it: one
// pass over a text finds whether any mark is in it.
var markStarts = func() (t [256][]string) {
	for _, m := range secretMarks {
		t[m[0]] = append(t[m[0]], m)
	}
	return t
}()

func maySecret(s string) bool {
	for i := 0; i < len(s); i++ {
		for _, m := range markStarts[s[i]] {
			if strings.HasPrefix(s[i:], m) {
				return true
			}
		}
	}
	return false
}

func maySecretBytes(b []byte) bool {
	for i := 0; i < len(b); i++ {
		for _, m := range markStarts[b[i]] {
			if len(b)-i >= len(m) && string(b[i:i+len(m)]) == m {
				return true
			}
		}
	}
	return false
}

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
// common keys and tokens, PEM private keys, JWTs, and the values that
// the environment holds in variables named *_KEY, *_TOKEN, *_SECRET or
// *_PASSWORD when Secrets is called, when they look like secrets (see
// secretLike: twelve characters or more, of two kinds at least).
func Secrets() *Redactor {
	r := &Redactor{secrets: true}
	for _, kv := range os.Environ() {
		name, val, _ := strings.Cut(kv, "=")
		if !secretLike(val) {
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

// secretLike reports whether an environment variable's value can be a
// secret worth finding everywhere: eight characters or more without
// spaces, and not a plain word: two kinds of characters at least (lower
// case, upper case, digits, others), or as varied as a random string (3
// bits a character). A plain word ("postgres", "changeme", "password")
// would be "found" in specs, prompts and answers that merely contain
// it, and rewrite them.
func secretLike(v string) bool {
	if len(v) < 8 || strings.ContainsAny(v, " \t\r\n") {
		return false
	}
	var lower, upper, digits, others bool
	counts := map[rune]int{}
	n := 0
	for _, c := range v {
		switch {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= '0' && c <= '9':
			digits = true
		default:
			others = true
		}
		counts[c]++
		n++
	}
	kinds := 0
	for _, k := range []bool{lower, upper, digits, others} {
		if k {
			kinds++
		}
	}
	if kinds >= 2 {
		return true
	}
	bits := 0.0
	for _, k := range counts {
		p := float64(k) / float64(n)
		bits -= p * math.Log2(p)
	}
	return bits >= 3
}

// PII returns a redactor of personal data alone (see WithPII).
func PII() *Redactor { return &Redactor{pii: true} }

// Pattern returns a redactor of what re matches, labelled name.
func Pattern(name string, re *regexp.Regexp) *Redactor {
	return &Redactor{custom: []namedPattern{{name, re}}}
}

// Redactor returns the redactor of the filter's matcher: Secrets for
// "secrets", PII for "pii", else its pattern.
func (f *ContentFilter) Redactor() (*Redactor, error) {
	switch f.Match {
	case "secrets":
		return Secrets(), nil
	case "pii":
		return PII(), nil
	}
	re, err := regexp.Compile(f.Pattern)
	if err != nil {
		return nil, err
	}
	return Pattern(f.Name, re), nil
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
// redact is returned as it is, without a copy. A secret hidden behind
// JSON escapes ("\u0073k-…", which decodes to "sk-…") is found too.
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	if plain, ok := unescapeASCII(s); ok {
		if out := r.redact(plain, false); out != plain {
			return out
		}
	}
	return r.redact(s, false)
}

// Bytes is String for bytes. A JSON document stays valid JSON: what is
// found inside a string is replaced in it, and what is found outside one
// (a card number written as a JSON number) becomes a string. A document
// with nothing to redact is returned as it is.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil || len(b) == 0 {
		return b
	}
	if bytes.Contains(b, []byte(`\u`)) {
		if plain, ok := unescapeASCII(string(b)); ok {
			if out := r.redact(plain, json.Valid(b)); out != plain {
				return []byte(out)
			}
		}
	}
	if !r.mayFind(b) {
		return b
	}
	s := string(b)
	if out := r.redact(s, json.Valid(b)); out != s {
		return []byte(out)
	}
	return b
}

// unescapeASCII rewrites the JSON escapes of printable ASCII characters
// (\u0073 for s) as the characters themselves, which JSON allows in a
// string as they are: the text means the same, and a secret spelt in
// escapes can be seen. An escape inside JSON kept as a string in JSON
// (\\u0073: a tool's output inside a run's record) is rewritten too,
// one level down. The quote and the backslash stay escaped. ok is false
// when there was nothing to rewrite.
func unescapeASCII(s string) (string, bool) {
	i := strings.Index(s, `\u`)
	if i < 0 {
		return s, false
	}
	var b strings.Builder
	last, changed := 0, false
	for ; i >= 0 && i+6 <= len(s); i = nextEscape(s, last) {
		// An odd number of backslashes before the escape's own makes it
		// an escaped backslash and a u: an escape of the JSON kept in this
		// string, which the pair of backslashes and the u spell.
		bs := 0
		for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
			bs++
		}
		c, ok := hexByte(s[i+2 : i+6])
		if !ok || c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b.WriteString(s[last : i+2])
			last = i + 2
			continue
		}
		start := i
		if bs%2 == 1 {
			start-- // the escaped backslash goes with it
		}
		b.WriteString(s[last:start])
		b.WriteByte(c)
		last, changed = i+6, true
	}
	if !changed {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// nextEscape is the index in s of the first \u at or after from, or -1.
func nextEscape(s string, from int) int {
	if i := strings.Index(s[from:], `\u`); i >= 0 {
		return from + i
	}
	return -1
}

// hexByte reads four hex digits as a code point below 0x100.
func hexByte(h string) (byte, bool) {
	var v int
	for i := 0; i < 4; i++ {
		c := h[i]
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return byte(v), v < 0x100
}

// mayFind reports whether r may find anything in b, without a copy: a
// false answer is certain.
func (r *Redactor) mayFind(b []byte) bool {
	if r.pii || len(r.custom) > 0 {
		return true
	}
	for _, v := range r.values {
		if bytes.Contains(b, []byte(v)) {
			return true
		}
	}
	return maySecretBytes(b) && secretShapes.Match(b)
}

// Event redacts the text an event carries, in place: its content, its
// tool call's arguments, output and error, its error's message and the
// strings of its data. Every run redacts its events as it emits them.
func (r *Redactor) Event(e *event.Event) {
	if r == nil {
		return
	}
	e.Content = r.String(e.Content)
	if tc := e.Tool; tc != nil {
		tc.Arguments = json.RawMessage(r.Bytes(tc.Arguments))
		tc.Output = json.RawMessage(r.Bytes(tc.Output))
		tc.Error = r.String(tc.Error)
	}
	if e.Error != nil {
		e.Error.Message = r.String(e.Error.Message)
	}
	if e.Progress != nil {
		e.Progress.Message = r.String(e.Progress.Message)
	}
	for k, v := range e.Data {
		switch v := v.(type) {
		case string:
			if clean := r.String(v); clean != v { // a string put in an any is an allocation
				e.Data[k] = clean
			}
		case map[string]any, []any:
			if b, err := json.Marshal(v); err == nil {
				if out := r.Bytes(b); string(out) != string(b) {
					var clean any
					if json.Unmarshal(out, &clean) == nil {
						e.Data[k] = clean
					}
				}
			}
		}
	}
}

// Found reports whether r finds anything in s.
func (r *Redactor) Found(s string) bool { return r.String(s) != s }

const (
	secretLabel = "[REDACTED:secret]"
	piiLabel    = "[REDACTED:pii]"
)

func (r *Redactor) redact(s string, isJSON bool) string {
	if r.secrets {
		for _, v := range r.values {
			s = replaceAll(s, literal(v), nil, secretLabel, isJSON)
		}
		if maySecret(s) {
			s = replaceAll(s, secretShapes, nil, secretLabel, isJSON)
		}
	}
	if r.pii {
		s = replaceAll(s, cardShape, luhn, piiLabel, isJSON)
		s = replaceAll(s, ibanShape, ibanValid, piiLabel, isJSON)
		s = replaceAll(s, emailShape, nil, piiLabel, isJSON)
		s = replaceAll(s, phoneShape, nil, piiLabel, isJSON)
	}
	for _, p := range r.custom {
		s = replaceAll(s, p.re, nil, "[REDACTED:"+p.name+"]", isJSON)
	}
	return s
}

// finder finds the spans to replace: a regular expression, or a literal.
type finder interface {
	FindAllStringIndex(s string, n int) [][]int
}

// literal finds every occurrence of a string.
type literal string

func (l literal) FindAllStringIndex(s string, _ int) [][]int {
	var out [][]int
	for at := 0; ; {
		i := strings.Index(s[at:], string(l))
		if i < 0 {
			return out
		}
		out = append(out, []int{at + i, at + i + len(l)})
		at += i + len(l)
	}
}

// replaceAll replaces the spans f finds (those ok accepts) with label;
// in JSON, a span outside a string becomes the string label.
func replaceAll(s string, f finder, ok func(string) bool, label string, isJSON bool) string {
	spans := f.FindAllStringIndex(s, -1)
	if len(spans) == 0 {
		return s
	}
	var inString []bool
	if isJSON {
		inString = stringBytes(s)
	}
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		if ok != nil && !ok(s[sp[0]:sp[1]]) {
			continue
		}
		if isJSON && !inString[sp[0]] {
			// Outside a string only a number can match: the whole number
			// becomes the label, as a string.
			for sp[0] > last && isNumberByte(s[sp[0]-1]) {
				sp[0]--
			}
			for sp[1] < len(s) && isNumberByte(s[sp[1]]) {
				sp[1]++
			}
			b.WriteString(s[last:sp[0]])
			b.WriteString(`"` + label + `"`)
		} else {
			b.WriteString(s[last:sp[0]])
			b.WriteString(label)
		}
		last = sp[1]
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// stringBytes marks the bytes of a JSON document that are inside a
// string literal (its quotes excluded).
func stringBytes(s string) []bool {
	in := make([]bool, len(s))
	inside, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case !inside:
			inside = c == '"'
		case escaped:
			escaped = false
			in[i] = true
		case c == '\\':
			escaped = true
			in[i] = true
		case c == '"':
			inside = false
		default:
			in[i] = true
		}
	}
	return in
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

// Applied is a content filter that found something in a text.
type Applied struct {
	Filter string
	Action Action
}

// Blocked returns the filter that blocked a text Apply was given, if one
// did (it is the last of applied).
func Blocked(applied []Applied) (filter string, ok bool) {
	if n := len(applied); n > 0 && applied[n-1].Action == Block {
		return applied[n-1].Filter, true
	}
	return "", false
}

// Apply runs the content filters on target over text, in order (see
// Filters.Apply): it returns the text with what redacting filters found
// replaced, and the filters that found something. It compiles the
// filters on each call: an enforcement point that runs often compiles
// them once, with Filters.
func (p *Policy) Apply(target Target, text string) (out string, applied []Applied) {
	return p.Filters(target).Apply(text, false)
}
