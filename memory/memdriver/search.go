package memdriver

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/agentry/agentry/memory"
)

// stopWords are left out of searches: they match nearly everything. The
// SQL backends leave the same words out of the queries they build.
var stopWords = map[string]bool{}

func init() {
	for w := range strings.FieldsSeq(`a an and are as at be but by do does did for from had has have he her his how i
		if in into is it its me my no not of on or our she so than that the their them then there these they
		this to was we were what when where which who whom why will with would you your`) {
		stopWords[w] = true
	}
}

// Terms returns the words a search for query looks for: lower-cased runs
// of letters and digits, stop words left out, each once, in order.
func Terms(query string) []string {
	var out []string
	for w := range strings.FieldsFuncSeq(strings.ToLower(query), notWordRune) {
		if !stopWords[w] && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// stem reduces a word to a rough root, so that "likes", "liked" and
// "liking" find "like": a few English suffixes, no dictionary.
func stem(w string) string {
	for _, suf := range []string{"ing", "ed", "es", "s"} {
		if r, ok := strings.CutSuffix(w, suf); ok && len(r) >= 3 {
			if suf == "es" && !strings.HasSuffix(r, "s") && !strings.HasSuffix(r, "x") && !strings.HasSuffix(r, "ch") && !strings.HasSuffix(r, "sh") {
				r += "e" // "likes" → "like", but "boxes" → "box"
			}
			return strings.TrimSuffix(r, "e")
		}
	}
	return strings.TrimSuffix(w, "e")
}

// ranker scores texts against the terms of a query with BM25, over the
// texts it is given: the backends that search in the process (in memory,
// Redis, sealed) rank alike.
type ranker struct {
	terms []string
}

func newRanker(query string) *ranker {
	r := &ranker{}
	for _, t := range Terms(query) {
		if s := stem(t); !slices.Contains(r.terms, s) {
			r.terms = append(r.terms, s)
		}
	}
	return r
}

// scores returns the BM25 score of each text (0 for a text that has none
// of the terms). The term counts of all texts share one slice.
func (r *ranker) scores(texts []string) []float64 {
	const k1, b = 1.2, 0.75
	out := make([]float64, len(texts))
	nt := len(r.terms)
	if nt == 0 || len(texts) == 0 {
		return out
	}
	tfs := make([]int, len(texts)*nt) // text i's count of term j at i*nt+j
	lengths := make([]int, len(texts))
	df := make([]int, nt)
	total := 0
	for i, t := range texts {
		tf := tfs[i*nt : (i+1)*nt]
		for w := range strings.FieldsFuncSeq(t, notWordRune) {
			lengths[i]++
			if j := r.index(w); j >= 0 {
				if tf[j] == 0 {
					df[j]++
				}
				tf[j]++
			}
		}
		total += lengths[i]
	}
	avg := float64(total) / float64(len(texts))
	n := float64(len(texts))
	for i := range texts {
		for j, f := range tfs[i*nt : (i+1)*nt] {
			if f == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df[j])+0.5)/(float64(df[j])+0.5))
			out[i] += idf * float64(f) * (k1 + 1) / (float64(f) + k1*(1-b+b*float64(lengths[i])/max(avg, 1)))
		}
	}
	return out
}

// index returns the term w stems to, or -1. Words are compared without
// case; most words are not terms and cost no allocation.
func (r *ranker) index(w string) int {
	for j, t := range r.terms {
		// A word matches a term when its stem does; the stem is no longer
		// than the word, so a word shorter than the term never does.
		if len(w) >= len(t) && strings.EqualFold(w[:len(t)], t) {
			if stem(strings.ToLower(w)) == t {
				return j
			}
		}
	}
	return -1
}

// SearchEntries ranks entries against query in the process, as the
// backends without a text index do: the best limit entries that have
// any of its terms, best first (newer first among equals).
func SearchEntries(entries []memory.Entry, query string, limit int) []memory.Hit {
	texts := make([]string, len(entries))
	for i := range entries {
		texts[i] = entries[i].Text
	}
	best := top(newRanker(query).scores(texts), limit, func(a, b int) int { return cmp.Compare(entries[b].ID, entries[a].ID) })
	hits := make([]memory.Hit, len(best))
	for i, b := range best {
		hits[i] = memory.Hit{Entry: entries[b.i], Score: b.score}
	}
	return hits
}

type scored struct {
	i     int
	score float64
}

// top returns the best limit (default 10) of the positive scores, best
// first, tie broken by tie.
func top(scores []float64, limit int, tie func(a, b int) int) []scored {
	var out []scored
	for i, s := range scores {
		if s > 0 {
			out = append(out, scored{i, s})
		}
	}
	slices.SortFunc(out, func(a, b scored) int { return cmp.Or(cmp.Compare(b.score, a.score), tie(a.i, b.i)) })
	return out[:min(len(out), limitOr(limit, 10))]
}

// SearchDocs ranks documents against text by their string values, as
// SearchEntries does entries.
func SearchDocs(docs []memory.Doc, text string, topK int) []memory.DocHit {
	texts := make([]string, len(docs))
	for i := range docs {
		texts[i] = DocText(docs[i].Value)
	}
	best := top(newRanker(text).scores(texts), topK, func(a, b int) int { return strings.Compare(docs[a].Key, docs[b].Key) })
	hits := make([]memory.DocHit, len(best))
	for i, b := range best {
		hits[i] = memory.DocHit{Doc: docs[b.i], Score: b.score}
	}
	return hits
}

// DocText is the text of a document a search looks at: its string
// values, nested ones too, in the order of their keys.
func DocText(v any) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(v)
			b.WriteByte('\n')
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(v[k])
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}

func limitOr(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}
