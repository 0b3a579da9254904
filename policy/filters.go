package policy

import "slices"

// Filters are a policy's content filters on one target, compiled once:
// what an enforcement point runs over each text it passes. A nil
// *Filters has none.
type Filters struct {
	list []compiled
}

type compiled struct {
	name   string
	action Action
	r      *Redactor
}

// Filters compiles the content filters of p on target; nil when there
// are none. A filter whose pattern does not compile is left out (Parse
// refuses such a policy).
func (p *Policy) Filters(target Target) *Filters {
	if p == nil {
		return nil
	}
	var out []compiled
	for i := range p.ContentFilters {
		f := &p.ContentFilters[i]
		if !slices.Contains(f.On, target) {
			continue
		}
		if r, err := f.Redactor(); err == nil {
			out = append(out, compiled{name: f.Name, action: f.Action, r: r})
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &Filters{list: out}
}

// Apply runs the filters over text, in order: each that finds something
// is in applied, in order; a redacting one replaces what it finds (in a
// JSON document, isJSON, keeping it valid JSON); a blocking one that
// finds something ends it, the last of applied, and out is the text it
// saw. Text in which nothing is found is returned as it is.
func (f *Filters) Apply(text string, isJSON bool) (out string, applied []Applied) {
	if f == nil {
		return text, nil
	}
	for _, c := range f.list {
		found := c.find(text, isJSON)
		if found == text {
			continue
		}
		applied = append(applied, Applied{Filter: c.name, Action: c.action})
		if c.action == Block {
			return text, applied
		}
		text = found
	}
	return text, applied
}

// Redact applies the redacting filters to text, whatever they find:
// for the copies of a text a blocking filter did not stop.
func (f *Filters) Redact(text string) string {
	if f == nil {
		return text
	}
	for _, c := range f.list {
		if c.action != Block {
			text = c.find(text, false)
		}
	}
	return text
}

func (c compiled) find(text string, isJSON bool) string {
	if isJSON {
		return string(c.r.Bytes([]byte(text)))
	}
	return c.r.String(text)
}
