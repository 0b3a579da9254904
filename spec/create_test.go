package spec

import (
	"slices"
	"testing"
)

func TestCreates(t *testing.T) {
	for _, tc := range []struct {
		name, js string
		want     []string
	}{
		{"bare", `{"agent_name": "a", "version": "v1", "model_name": "m", "system_text": "s"}`, []string{"agent:a"}},
		{"everything", `{"agent_name": "a", "version": "v1", "model_name": "m", "system_text": "s",
			"tools": ["kv_get", "agent:helper@v2", "mcp:fs/read", "mcp:fs/write", "a2a:https://agents.example.com:8443/crm", "a2a:https://AGENTS.example.com./other", "crm:contacts/list"],
			"mcp_servers": [{"name": "fs", "command": "npx", "args": ["-y", "@scope/fs"]}, {"name": "web", "url": "https://user:pw@MCP.example.com/mcp"}],
			"memory": {"backend": "postgres://ann:secret@DB.example.com:5432/mem"},
			"connectors": {"sql": {"dsn": "x"}, "http": {}},
			"handoffs": ["billing@v1", "helper"]}`,
			[]string{"agent:a", "agent:billing", "agent:helper", "connector:http", "connector:sql", "mcp:npx -y @scope/fs", "mcp:mcp.example.com", "memory:postgres://db.example.com",
				"tool:kv_get", "a2a:agents.example.com", "crm:contacts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := Parse("test", []byte(tc.js))
			if err != nil {
				t.Fatal(err)
			}
			if got := sp.Creates(); !slices.Equal(got, tc.want) {
				t.Errorf("Creates() = %q\nwant %q", got, tc.want)
			}
		})
	}
}
