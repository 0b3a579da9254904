package prompt

import (
	"github.com/mailgun/raymond/v2"
	"github.com/mailgun/raymond/v2/ast"
	"github.com/mailgun/raymond/v2/parser"
)

// handlebarsVars adds the variables a Handlebars text reads from its
// top-level context: the paths of its mustaches and the arguments of its
// helpers. Inside a block that changes the context ({{#each}}, {{#with}},
// a section) paths are the block's, not the input's; {{#if}} and
// {{#unless}} keep it.
func handlebarsVars(text string, add func(string)) error {
	prog, err := parser.Parse(text)
	if err != nil {
		return err
	}
	hbProgram(prog, add)
	return nil
}

func hbProgram(p *ast.Program, add func(string)) {
	if p == nil {
		return
	}
	for _, n := range p.Body {
		hbNode(n, add)
	}
}

func hbNode(n ast.Node, add func(string)) {
	switch n := n.(type) {
	case *ast.MustacheStatement:
		hbExpr(n.Expression, add)
	case *ast.BlockStatement:
		hbExpr(n.Expression, add)
		if p, ok := n.Expression.Path.(*ast.PathExpression); ok && len(n.Expression.Params) > 0 &&
			(p.Original == "if" || p.Original == "unless") {
			hbProgram(n.Program, add)
		}
		hbProgram(n.Inverse, add)
	case *ast.Expression:
		hbExpr(n, add)
	case *ast.SubExpression:
		hbExpr(n.Expression, add)
	case *ast.PathExpression:
		if !n.Data && n.Depth == 0 && len(n.Parts) > 0 && n.Parts[0] != "this" {
			add(n.Parts[0])
		}
	}
}

// hbExpr: a plain path is a variable; a helper call reads its arguments.
func hbExpr(e *ast.Expression, add func(string)) {
	if e == nil {
		return
	}
	if len(e.Params) == 0 && e.Hash == nil {
		hbNode(e.Path, add)
		return
	}
	for _, p := range e.Params {
		hbNode(p, add)
	}
	if e.Hash != nil {
		for _, pair := range e.Hash.Pairs {
			hbNode(pair.Val, add)
		}
	}
}

// renderHandlebars renders text with fill, unescaped: prompts are not
// HTML.
func renderHandlebars(text string, fill map[string]any) (string, error) {
	return raymond.Render(text, safe(fill))
}

// safe marks the strings of v as not to be escaped.
func safe(v any) any {
	switch x := v.(type) {
	case string:
		return raymond.SafeString(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = safe(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = safe(e)
		}
		return out
	}
	return v
}
