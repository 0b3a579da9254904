package policy

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestSecrets(t *testing.T) {
	t.Setenv("ACME_API_KEY", "acme-7Hq2-value-of-the-key")
	t.Setenv("DB_PASSWORD", `pa"ss\word-1234`)
	t.Setenv("SHORT_TOKEN", "abc") // too short to be told from ordinary text
	t.Setenv("HOME_DIR", "/home/someone-long")
	t.Setenv("APP_TOKEN", "changeme") // a plain word, not a secret
	t.Setenv("PG_PASSWORD", "postgres")
	t.Setenv("SHORT_PASSWORD", "s3cretpw") // short, but not a word: a secret
	r := Secrets()
	for _, tc := range []struct{ name, in, want string }{
		{"openai", "key sk-proj-abcdefghijklmnopqrstuvwx01 here", "key [REDACTED:secret] here"},
		{"anthropic", "sk-ant-api03-abcdefghijklmnopqrstuv", "[REDACTED:secret]"},
		{"google", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "[REDACTED:secret]"},
		{"github", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED:secret]"},
		{"slack", "xoxb-1234567890-abcdef", "[REDACTED:secret]"},
		{"stripe", "sk_live_abcdefghijklmnop1234", "[REDACTED:secret]"},
		{"aws", "id AKIAIOSFODNN7EXAMPLE.", "id [REDACTED:secret]."},
		{"bearer", "Authorization: Bearer abcdefghijklmnop.qrstu", "Authorization: [REDACTED:secret]"},
		{"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "[REDACTED:secret]"},
		{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "[REDACTED:secret]"},
		{"env value", "the key is acme-7Hq2-value-of-the-key.", "the key is [REDACTED:secret]."},
		{"env value with quotes", `pw: pa"ss\word-1234`, "pw: [REDACTED:secret]"},
		{"short env value kept", "abc", "abc"},
		{"other env kept", "/home/someone-long", "/home/someone-long"},
		{"plain text kept", "The answer is 42.", "The answer is 42."},
		{"a common env value kept", "connect as postgres; ${changeme} stays", "connect as postgres; ${changeme} stays"},
		{"a short env secret", "the password is s3cretpw.", "the password is [REDACTED:secret]."},
		{"JSON-escaped shape", `{"out": "\u0073k-proj-abcdefghijklmnopqrstuvwx01"}`, `{"out": "[REDACTED:secret]"}`},
		{"JSON-escaped env value", `"acme-7Hq2-value-of-the-k\u0065y"`, `"[REDACTED:secret]"`},
		{"an escape in JSON kept as a string", `{"output": "{\"key\": \"\\u0073k-proj-abcdefghijklmnopqrstuvwx01\"}"}`,
			`{"output": "{\"key\": \"[REDACTED:secret]\"}"}`},
		{"escapes with nothing to find kept", `"caf\u00e9 \u0041BC"`, `"caf\u00e9 \u0041BC"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	// Inside JSON: the escaped form of a value is found, and the JSON
	// stays valid.
	doc, _ := json.Marshal(map[string]string{"password": `pa"ss\word-1234`, "key": "acme-7Hq2-value-of-the-key",
		"pem": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"})
	out := r.Bytes(doc)
	if !json.Valid(out) || strings.Contains(string(out), "word-1234") || strings.Contains(string(out), "value-of-the-key") ||
		strings.Contains(string(out), "AAAA") {
		t.Errorf("Bytes(%s) = %s", doc, out)
	}
	escaped := []byte(`{"out": "\u0073k-proj-abcdefghijklmnopqrstuvwx01", "n": 1}`)
	if out := r.Bytes(escaped); !json.Valid(out) || strings.Contains(string(out), "abcdefghijklmnop") {
		t.Errorf("Bytes(%s) = %s; want the escaped secret redacted", escaped, out)
	}
	plain := []byte(`{"a": 1}`)
	if got := r.Bytes(plain); &got[0] != &plain[0] {
		t.Error("Bytes copied a document with nothing to redact")
	}
	var nilR *Redactor
	if nilR.String("sk-proj-abcdefghijklmnopqrstuvwx01") == "" {
		t.Error("a nil redactor changed its input")
	}
}

func TestPII(t *testing.T) {
	r := Secrets().WithPII()
	for _, tc := range []struct{ name, in, want string }{
		{"email", "write to ada.lovelace@example.co.uk today", "write to [REDACTED:pii] today"},
		{"phone", "call +44 20 7946 0958 now", "call [REDACTED:pii] now"},
		{"card passing Luhn", "card 4111 1111 1111 1111 ok", "card [REDACTED:pii] ok"},
		{"card failing Luhn", "order 4111 1111 1111 1112", "order 4111 1111 1111 1112"},
		{"iban", "pay to GB82 WEST 1234 5698 7654 32 please", "pay to [REDACTED:pii] please"},
		{"iban failing its check", "GB00 WEST 1234 5698 7654 32", "GB00 WEST 1234 5698 7654 32"},
		{"plain", "3 days in Lisbon", "3 days in Lisbon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	if Secrets().String("ada@example.com") != "ada@example.com" {
		t.Error("the secrets redactor redacts e-mail addresses")
	}
	custom := Secrets().WithPattern("drop", regexp.MustCompile(`(?i)drop\s+table`))
	if got := custom.String("please DROP  TABLE users"); got != "please [REDACTED:drop] users" || !custom.Found("drop table") {
		t.Errorf("pattern: %q", got)
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range []string{`{"k":"sk-proj-abcdefghijklmnopqrstuvwx01"}`, "-----BEGIN PRIVATE KEY-----\"x", "GB82 WEST 1234 5698 7654 32",
		`{"a":"Bearer abcdefghijklmnopq\"","b":1}`, "4111-1111-1111-1111"} {
		f.Add(s)
	}
	r := Secrets().WithPII()
	f.Fuzz(func(t *testing.T, s string) {
		out := r.String(s)
		if r.String(out) != out {
			t.Errorf("redacting twice changes %q: %q then %q", s, out, r.String(out))
		}
		if json.Valid([]byte(s)) && !json.Valid(r.Bytes([]byte(s))) {
			t.Errorf("redaction broke the JSON %q: %q", s, r.Bytes([]byte(s)))
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `{"tools": {"allow": ["kv_*"]}}`, `{"rate_limits": {"*": {"per_minute": 60}}}`,
		`{"content_filters": [{"name": "f", "pattern": "(?i)x", "on": ["output"], "action": "block"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err == nil && len(p.Check()) != 0 {
			t.Errorf("Parse accepted a policy Check refuses: %s", data)
		}
	})
}

// Outside a string, only a number can match; it becomes a string, and the
// document stays JSON.
func TestRedactJSONNumbers(t *testing.T) {
	r := Secrets().WithPII()
	for _, tc := range []struct{ in, want string }{
		{` 12345576598754`, ` "[REDACTED:pii]"`},
		{`{"card": 4111111111111111.5, "n": 3}`, `{"card": "[REDACTED:pii]", "n": 3}`},
		{`["4111 1111 1111 1111", 1]`, `["[REDACTED:pii]", 1]`},
		{`{"note": "a \"quoted\" 4111111111111111"}`, `{"note": "a \"quoted\" [REDACTED:pii]"}`},
	} {
		got := string(r.Bytes([]byte(tc.in)))
		if got != tc.want || !json.Valid([]byte(got)) {
			t.Errorf("Bytes(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
