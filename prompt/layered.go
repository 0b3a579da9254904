package prompt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// Fixed is a read-only store of the templates given (the built-in ReAct
// templates, for one).
func Fixed(ts ...Template) Store { return fixed(ts) }

type fixed []Template

func (f fixed) Get(_ context.Context, id string, version string) (Template, error) {
	found, err := Pick(id, version, f.versions(id))
	if err != nil {
		return Template{}, err
	}
	for _, t := range f {
		if t.ID == id && t.Version == found {
			return t, nil
		}
	}
	return Template{}, fmt.Errorf("%w: %s@%s", ErrNotFound, id, version) // unreachable: pick found it
}

func (f fixed) versions(id string) []string {
	var out []string
	for _, t := range f {
		if t.ID == id {
			out = append(out, t.Version)
		}
	}
	return out
}

func (f fixed) Put(context.Context, Template) (Template, error) {
	return Template{}, fmt.Errorf("%w: built-in templates", ErrReadOnly)
}

func (f fixed) List(_ context.Context, flt Filter) ([]Template, error) {
	return Select(f, flt), nil
}

// Select returns the templates of ts the filter selects, sorted: of each
// id, every version when f.AllVersions, else the latest (the filter's
// tag looks at the versions it keeps). Stores list with it.
func Select(ts []Template, f Filter) []Template {
	newest := map[string]string{}
	for _, t := range ts {
		if v, ok := newest[t.ID]; !ok || CompareVersions(t.Version, v) > 0 {
			newest[t.ID] = t.Version
		}
	}
	var out []Template
	for _, t := range ts {
		if f.Matches(&t) && (f.AllVersions || newest[t.ID] == t.Version) {
			out = append(out, t)
		}
	}
	SortTemplates(out)
	return out
}

// SortTemplates orders templates by id, then version (CompareVersions).
func SortTemplates(ts []Template) {
	slices.SortFunc(ts, func(a, b Template) int { return cmp.Or(cmp.Compare(a.ID, b.ID), CompareVersions(a.Version, b.Version)) })
}

// Layered is the stores given as one: Get takes a template from the
// first store that has its id, Put goes to the first store, List lists
// each id from the first store that has it.
func Layered(stores ...Store) Store { return layered(stores) }

type layered []Store

func (l layered) Get(ctx context.Context, id string, version string) (Template, error) {
	var first error
	for _, s := range l {
		t, err := s.Get(ctx, id, version)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return t, err
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return Template{}, first
}

func (l layered) Put(ctx context.Context, t Template) (Template, error) {
	if len(l) == 0 {
		return t, ErrReadOnly
	}
	return l[0].Put(ctx, t)
}

func (l layered) List(ctx context.Context, f Filter) ([]Template, error) {
	var out []Template
	seen := map[string]bool{}
	for _, s := range l {
		ts, err := s.List(ctx, f)
		if err != nil {
			return nil, err
		}
		ids := map[string]bool{}
		for _, t := range ts {
			if !seen[t.ID] {
				out = append(out, t)
				ids[t.ID] = true
			}
		}
		for id := range ids {
			seen[id] = true
		}
	}
	SortTemplates(out)
	return out, nil
}
