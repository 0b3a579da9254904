package prompt

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MissingVarError names a ${var} of a template that the input lacks.
type MissingVarError struct {
	Field string // "system_text", ...
	Var   string
}

func (e *MissingVarError) Error() string {
	return fmt.Sprintf("%s uses ${%s} but the input has no %q", e.Field, e.Var, e.Var)
}

// Render fills ${var} placeholders in text from vars. Strings are inserted
// as they are, other values as JSON. "$${" writes a literal "${". A
// placeholder with no value is a *MissingVarError.
func Render(field, text string, vars map[string]any) (string, error) {
	if !strings.Contains(text, "${") {
		return text, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(text, "${")
		if i < 0 {
			b.WriteString(text)
			return b.String(), nil
		}
		if i > 0 && text[i-1] == '$' {
			b.WriteString(text[:i-1])
			b.WriteString("${")
			text = text[i+2:]
			continue
		}
		end := strings.IndexByte(text[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%s: unclosed ${ at %q", field, text[i:min(len(text), i+20)])
		}
		name := strings.TrimSpace(text[i+2 : i+end])
		v, ok := vars[name]
		if !ok {
			return "", &MissingVarError{Field: field, Var: name}
		}
		b.WriteString(text[:i])
		b.WriteString(formatValue(v))
		text = text[i+end+1:]
	}
}

// Vars returns the names of the ${var} placeholders in text, in order.
func Vars(text string) []string {
	var out []string
	for {
		i := strings.Index(text, "${")
		if i < 0 {
			return out
		}
		if i > 0 && text[i-1] == '$' {
			text = text[i+2:]
			continue
		}
		end := strings.IndexByte(text[i:], '}')
		if end < 0 {
			return out
		}
		out = append(out, strings.TrimSpace(text[i+2:i+end]))
		text = text[i+end+1:]
	}
}

func formatValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
