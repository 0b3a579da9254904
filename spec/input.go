package spec

import "encoding/json"

// InputJSONSchema is the JSON Schema of what the agent takes, as a tool
// of another agent or of a protocol (MCP, A2A) takes it: its
// input_schema, or its input_keys as required strings, or a single
// required "task".
func (s *Spec) InputJSONSchema() json.RawMessage {
	if len(s.InputSchema) > 0 {
		return s.InputSchema
	}
	keys := s.InputKeys
	if len(keys) == 0 {
		keys = []string{"task"}
	}
	props := make(map[string]any, len(keys))
	for _, k := range keys {
		props[k] = map[string]any{"type": "string"}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": keys, "additionalProperties": false})
	return b
}
