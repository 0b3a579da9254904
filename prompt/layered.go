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

func (f fixed) Get(_ context.Context, id string, version int) (Template, error) {
	var found *Template
	for i := range f {
		t := &f[i]
		if t.ID == id && (version == 0 && (found == nil || t.Version > found.Version) || t.Version == version) {
			found = t
		}
	}
	if found == nil {
		return Template{}, fmt.Errorf("%w: %s@%d", ErrNotFound, id, version)
	}
	return *found, nil
}

func (f fixed) Put(context.Context, Template) (Template, error) {
	return Template{}, fmt.Errorf("%w: built-in templates", ErrReadOnly)
}

func (f fixed) List(_ context.Context, flt Filter) ([]Template, error) {
	latest := map[string]int{}
	for _, t := range f {
		latest[t.ID] = max(latest[t.ID], t.Version)
	}
	var out []Template
	for _, t := range f {
		if flt.Matches(&t) && (flt.AllVersions || latest[t.ID] == t.Version) {
			out = append(out, t)
		}
	}
	sortTemplates(out)
	return out, nil
}

func sortTemplates(ts []Template) {
	slices.SortFunc(ts, func(a, b Template) int { return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Version, b.Version)) })
}

// Layered is the stores given as one: Get takes a template from the
// first store that has its id, Put goes to the first store, List lists
// each id from the first store that has it.
func Layered(stores ...Store) Store { return layered(stores) }

type layered []Store

func (l layered) Get(ctx context.Context, id string, version int) (Template, error) {
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
	sortTemplates(out)
	return out, nil
}
