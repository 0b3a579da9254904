// Package liquid adds the Liquid engine to package prompt: import it
// for its effect, as a database/sql driver is,
//
//	import _ "github.com/agentry/agentry/prompt/liquid"
//
// and a template whose engine is "liquid" renders with
// github.com/osteele/liquid: {{ var | filter }}, {% if %}, {% for %}
// and Liquid's standard filters. No tag reads a file: include and render
// are refused, so a template from a store cannot pull a host file into a
// prompt. The agentry binary links it.
package liquid

import (
	"errors"
	"strings"

	"github.com/osteele/liquid"
	"github.com/osteele/liquid/render"

	"github.com/agentry/agentry/prompt"
)

func init() {
	prompt.RegisterEngine(prompt.Liquid, prompt.EngineDriver{Vars: vars, Render: renderText})
}

// engine renders Liquid templates: the standard tags and filters,
// but for the tags that read files (include, and render where it
// exists), which a template from a store must not reach. Undefined
// variables render empty, as Liquid's do; a strict render asks for them
// by name first (vars).
var engine = func() *liquid.Engine {
	e := liquid.NewEngine()
	refuse := func(render.Context) (string, error) {
		return "", errors.New("a prompt template reads no file: include and render are not allowed")
	}
	e.RegisterTag("include", refuse)
	e.RegisterTag("render", refuse)
	return e
}()

// vars calls add with each parameter a Liquid text uses, in order, and
// whether it only tests it (an absent one answers false); an error when
// the text does not parse. It walks the tree the library parses, so a
// comment or a raw block holds none; in each expression a name is a
// parameter unless it is a field (a.name), a filter (| name), a keyword
// (and, or, contains, limit: …) or the template's own (what it assigns,
// captures or loops with). What a name's value cannot tell the
// scan ({{ user[key] }} needs key, not user's keys) is declared in
// required_vars.
func vars(text string, add func(name string, cond bool)) error {
	tpl, err := engine.ParseString(text)
	if err != nil {
		return err
	}
	s := &scan{own: map[string]bool{"forloop": true, "tablerowloop": true}}
	s.node(tpl.GetRoot())
	for _, f := range s.found {
		if !s.own[f.name] {
			add(f.name, f.cond)
		}
	}
	return nil
}

// scan is the names a template's tree uses, in order, and its own.
type scan struct {
	found []use
	own   map[string]bool
}

type use struct {
	name string
	cond bool // only tested
}

func (s *scan) node(n render.Node) {
	switch n := n.(type) {
	case *render.SeqNode:
		for _, c := range n.Children {
			s.node(c)
		}
	case *render.ObjectNode:
		s.expr(n.Args, false)
	case *render.TagNode:
		s.tag(n.Name, n.Args)
	case *render.BlockNode:
		s.tag(n.Name, n.Args)
		for _, c := range n.Body {
			s.node(c)
		}
		for _, c := range n.Clauses {
			s.node(c)
		}
	}
}

// tag reads the names of a tag's arguments.
func (s *scan) tag(name, args string) {
	switch name {
	case "if", "elsif", "unless", "case", "when":
		s.expr(args, true)
	case "for", "tablerow":
		v, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
		s.own[v] = true
		s.expr(strings.TrimPrefix(strings.TrimSpace(rest), "in "), false)
	case "assign":
		v, rest, _ := strings.Cut(args, "=")
		s.own[strings.TrimSpace(v)] = true
		s.expr(rest, false)
	case "capture":
		s.own[strings.TrimSpace(args)] = true
	default:
		s.expr(args, false)
	}
}

// keywords are the words of Liquid's expressions that name no value.
var keywords = map[string]bool{"and": true, "or": true, "contains": true, "in": true, "reversed": true, "limit": true, "offset": true,
	"with": true, "as": true, "true": true, "false": true, "nil": true, "null": true, "empty": true, "blank": true}

// expr notes the names of an expression that are parameters.
func (s *scan) expr(e string, cond bool) {
	for i := 0; i < len(e); {
		c := e[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(e[i+1:], c)
			if end < 0 {
				return
			}
			i += end + 2
		case isLetter(c):
			j := i
			for j < len(e) && (isLetter(e[j]) || e[j] >= '0' && e[j] <= '9') {
				j++
			}
			name := e[i:j]
			before := strings.TrimRight(e[:i], " \t\n")
			after := strings.TrimLeft(e[j:], " \t\n")
			// a.name is a field, | name a filter; (1..name) is a range.
			field := strings.HasSuffix(before, ".") && !strings.HasSuffix(before, "..") || strings.HasSuffix(before, "|")
			if !field && !strings.HasPrefix(after, ":") && !keywords[name] {
				s.found = append(s.found, use{name, cond})
			}
			i = j
		case c >= '0' && c <= '9':
			for i < len(e) && (e[i] >= '0' && e[i] <= '9' || e[i] == '.') {
				i++
			}
		default:
			i++
		}
	}
}

func isLetter(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// renderText renders a Liquid text with params.
func renderText(text string, params map[string]any) (string, error) {
	out, err := engine.ParseAndRenderString(text, params)
	if err != nil {
		return "", err
	}
	return out, nil
}
