package tool

import "encoding/json"

// ResultData is the standard shape of what an exploring tool found (the
// jeeves seed's ToolResultData): the items it looked at and those left,
// what it discovered, the evidence for it, and the rest as it came.
type ResultData struct {
	ItemsExplored []string       `json:"items_explored,omitempty"`
	ItemsPending  []string       `json:"items_pending,omitempty"`
	Discoveries   []Discovery    `json:"discoveries,omitempty"`
	Evidence      []Evidence     `json:"evidence,omitempty"`
	Raw           map[string]any `json:"raw,omitempty"`
}

// Discovery is one thing a tool found.
type Discovery struct {
	Type     string         `json:"type,omitempty"`
	Name     string         `json:"name"`
	Location string         `json:"location,omitempty"`
	Details  map[string]any `json:"details,omitempty"`
}

// Evidence supports a finding: where it was seen, and what was there.
type Evidence struct {
	Source     string  `json:"source"`
	Content    string  `json:"content,omitempty"`
	Location   string  `json:"location,omitempty"`
	Confidence float64 `json:"confidence,omitempty"`
}

// NewResultData reads the known fields of data (items_explored,
// items_pending, discoveries, evidence; JSON values or Go ones) and keeps
// the rest in Raw. A field of the wrong shape stays in Raw too: nothing
// is lost.
func NewResultData(data map[string]any) *ResultData {
	r := &ResultData{}
	for k, v := range data {
		var ok bool
		switch k {
		case "items_explored":
			ok = convert(v, &r.ItemsExplored)
		case "items_pending":
			ok = convert(v, &r.ItemsPending)
		case "discoveries":
			ok = convert(v, &r.Discoveries)
		case "evidence":
			ok = convert(v, &r.Evidence)
		}
		if !ok {
			if r.Raw == nil {
				r.Raw = map[string]any{}
			}
			r.Raw[k] = v
		}
	}
	return r
}

// convert puts v into out through JSON, reporting whether it fit.
func convert[T any](v any, out *T) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	var t T
	if json.Unmarshal(b, &t) != nil {
		return false
	}
	*out = t
	return true
}
