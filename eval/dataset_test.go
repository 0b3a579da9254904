package eval_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentry/agentry/eval"
)

func TestLoad(t *testing.T) {
	for _, path := range []string{"testdata/triage.json", "testdata/triage.jsonl"} {
		ds, err := eval.Load(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if ds.Name != "triage" || len(ds.Assert) != 1 || len(ds.Cases) < 2 || ds.Cases[1].Name != "crash" {
			t.Errorf("%s: %+v", path, ds)
		}
	}
}

// A bad dataset is an error naming the case and the field.
func TestBadDatasets(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"not JSON", `{"name": `, "unexpected EOF"},
		{"unknown field", `{"name": "d", "cases": [{"name": "a", "input": {}, "expect": {}}]}`, `unknown field "cases[0].expect" (did you mean "expected"?)`},
		{"no cases", `{"name": "d", "cases": []}`, "cases: the dataset has none"},
		{"no name", `{"cases": [{"input": {}}]}`, "cases[0]: name is required"},
		{"a name twice", `{"cases": [{"name": "a", "input": {}}, {"name": "a", "input": {}}]}`, `cases[1] "a": the name is taken`},
		{"no input", `{"cases": [{"name": "a"}]}`, `cases[0] "a": input (a JSON object) or conversation is required`},
		{"unknown type", `{"cases": [{"name": "a", "input": {}, "assert": [{"type": "vibes"}]}]}`, `cases[0] "a": assert[0] (vibes): unknown type`},
		{"bad regex", `{"cases": [{"name": "a", "input": {}, "assert": [{"type": "regex", "value": "("}]}]}`, `assert[0] (regex): value: error parsing regexp`},
		{"a tool check without a tool", `{"cases": [{"name": "a", "input": {}, "assert": [{"type": "tool_called"}]}]}`, `assert[0] (tool_called): tool is required`},
		{"equals without expected", `{"assert": [{"type": "equals"}], "cases": [{"name": "a", "input": {}}]}`, `cases[0] "a": expected is required by its equals assertion`},
		{"a judge without a rubric", `{"cases": [{"name": "a", "input": {}, "assert": [{"type": "judge", "agent": "j"}]}]}`, `(judge): rubric is required`},
		{"a score out of range", `{"cases": [{"name": "a", "input": {}, "assert": [{"type": "judge", "agent": "j", "rubric": "r", "min_score": 2}]}]}`, `min_score 2 is outside 0..1`},
		{"a limit that is not a number", `{"assert": [{"type": "max_steps", "value": "three"}], "cases": [{"name": "a", "input": {}}]}`, `assert[0] (max_steps): value: want a number`},
		{"a misspelled outcome", `{"cases": [{"name": "a", "input": {}, "assert": [{"type": "outcome", "value": "sucess"}]}]}`, `(outcome): value "sucess": want one of success, error`},
		{"bad schema", `{"cases": [{"name": "a", "input": {}, "assert": [{"type": "json_schema", "value": {"type": 7}}]}]}`, `(json_schema): value:`},
		{"a bad JSON line", "{\"name\": \"d\"}\n{\"name\": \"a\", \"input\": {}}\n{\"name\": ", "line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := eval.Parse("d.json", []byte(tc.data))
			if !errors.Is(err, eval.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "dataset d.json: ") {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// A dataset written over many lines reports its own problem (not a JSON
// Lines one), and a JSON Lines file of one case is a dataset.
func TestDatasetFormats(t *testing.T) {
	pretty := "{\n  \"name\": \"d\",\n  \"cases\": [\n    {\"name\": \"a\", \"input\": {}, \"expect\": {}}\n  ]\n}\n"
	if _, err := eval.Parse("d.json", []byte(pretty)); err == nil || !strings.Contains(err.Error(), `unknown field "cases[0].expect"`) {
		t.Errorf("a typo in a pretty dataset: %v", err)
	}
	wrongType := "{\n  \"cases\": [{\"name\": \"a\", \"input\": {}, \"tags\": \"tech\"}]\n}\n"
	if _, err := eval.Parse("d.json", []byte(wrongType)); err == nil || !strings.Contains(err.Error(), "tags") {
		t.Errorf("a wrong type: %v", err)
	}
	one, err := eval.Parse("d.jsonl", []byte(`{"name": "only", "input": {"q": "x"}}`+"\n"))
	if err != nil || len(one.Cases) != 1 || one.Cases[0].Name != "only" {
		t.Errorf("one case: %+v, %v", one, err)
	}
}

// A pretty-printed dataset with a syntax mistake reports it, not a JSON
// Lines problem.
func TestBrokenDocument(t *testing.T) {
	broken := "{\n  \"name\": \"d\",\n  \"cases\": [\n    {\"name\": \"a\", \"input\": {}},\n  ]\n}\n"
	_, err := eval.Parse("d.json", []byte(broken))
	if err == nil || strings.Contains(err.Error(), "line 1: unexpected end") || !strings.Contains(err.Error(), "invalid character") {
		t.Errorf("%v", err)
	}
}
