package agent

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/tool"
)

// A turn's calls run in the order the Noema spec's AgentHints ask:
// "follow dependencies in action sequencing" and "use estimatedImpact
// for prioritization". A call whose tool depends on a tool also called
// in the turn (declared by the tool, tool.Info.DependsOn, or by the
// hints of its last result in the run) runs after that call, not beside
// it; among the calls that may run together, the higher a tool's last
// estimated impact, the sooner, ties in the order asked. The steps are
// recorded in the order run, each that waited saying after what and why.

// schedule is the calls' order: waves that run one after another, each
// wave's calls together (most impact first), and per call why it waited.
type schedule struct {
	waves [][]int
	after []string // per call: what it waited for, and why ("" for none)
}

// toolHints is what the run learnt of a tool from its last result.
type toolHints struct {
	dependsOn []string
	impact    float64
	rated     bool // impact was given
}

// learn keeps what a result's hints say of its tool's order.
func (rs *reasoning) learn(name string, h *tool.Hints) {
	if len(h.Dependencies) == 0 && h.EstimatedImpact == nil {
		return
	}
	if rs.byTool == nil {
		rs.byTool = map[string]toolHints{}
	}
	th := toolHints{dependsOn: h.Dependencies}
	if h.EstimatedImpact != nil {
		th.impact, th.rated = *h.EstimatedImpact, true
	}
	rs.byTool[name] = th
}

// schedule orders calls; nil when nothing orders them (they run as
// asked), which is every turn of a run whose tools declare no
// dependency and whose results rated nothing.
func (r *run) schedule(calls []llm.ToolCall) *schedule {
	if len(calls) < 2 {
		return nil
	}
	var learnt map[string]toolHints
	if r.reasoning != nil {
		learnt = r.reasoning.byTool
	}
	table := r.a.table().byName
	deps := func(name string) ([]string, string) {
		if th, ok := learnt[name]; ok && len(th.dependsOn) > 0 {
			return th.dependsOn, "its last result's hints"
		}
		if b := table[name]; b != nil && len(b.info.DependsOn) > 0 {
			return b.info.DependsOn, "the tool declares it"
		}
		return nil, ""
	}
	ordered := false
	for i := range calls {
		if d, _ := deps(calls[i].Name); len(d) > 0 || learnt[calls[i].Name].rated {
			ordered = true
			break
		}
	}
	if !ordered {
		return nil
	}
	s := &schedule{after: make([]string, len(calls))}
	waits := make([][]int, len(calls)) // the calls each waits for
	for i := range calls {
		d, why := deps(calls[i].Name)
		var names []string
		for j := range calls {
			if j != i && calls[j].Name != calls[i].Name && slices.Contains(d, calls[j].Name) {
				waits[i] = append(waits[i], j)
				names = append(names, fmt.Sprintf("%s (%s)", calls[j].ID, calls[j].Name))
			}
		}
		if len(names) > 0 {
			s.after[i] = fmt.Sprintf("%s: %s depends on it (%s)", strings.Join(names, ", "), calls[i].Name, why)
		}
	}
	done := make([]bool, len(calls))
	for left := len(calls); left > 0; {
		var wave []int
		for i := range calls {
			if !done[i] && !slices.ContainsFunc(waits[i], func(j int) bool { return !done[j] }) {
				wave = append(wave, i)
			}
		}
		if len(wave) == 0 { // a cycle: the rest run together, as asked
			for i := range calls {
				if !done[i] {
					wave = append(wave, i)
					s.after[i] = "a dependency cycle: run as asked"
				}
			}
		}
		slices.SortStableFunc(wave, func(a, b int) int {
			return cmp.Compare(learnt[calls[b].Name].impact, learnt[calls[a].Name].impact)
		})
		for _, i := range wave {
			done[i] = true
		}
		left -= len(wave)
		s.waves = append(s.waves, wave)
	}
	return s
}

// order is every call in the order run.
func (s *schedule) order() []int {
	var out []int
	for _, w := range s.waves {
		out = append(out, w...)
	}
	return out
}
