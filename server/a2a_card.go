package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/spec"
)

// a2aCard answers the card of the agent the path names (at the
// well-known path, the default agent's): A2A 1.0's card with 0.3's
// fields beside it (the SDK's compatible form), so that clients of
// either version read it.
func (s *Server) a2aCard(w http.ResponseWriter, r *http.Request) {
	a, name, err := s.a2aAgent(r)
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	endpoint := s.baseURL(r) + "/a2a"
	if r.PathValue("agent") != "" {
		endpoint += "/" + url.PathEscape(name)
	}
	data, err := cardJSON(r.Context(), s.cardOf(a, endpoint))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "error", fmt.Sprintf("agent %s: its card does not encode: %v", name, err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

// cardJSON is the card in the SDK's form for clients of 1.0 and 0.3
// alike, each security scheme in both shapes: the SDK writes 0.3's
// alone (type, scheme), which its 1.0 parser refuses, and both parsers
// read a scheme that has 0.3's fields and 1.0's wrapper
// (httpAuthSecurityScheme).
func cardJSON(ctx context.Context, card *a2a.AgentCard) ([]byte, error) {
	producer, _ := a2av0.NewStaticAgentCardProducer(card).(a2asrv.AgentCardJSONProducer)
	data, err := producer.CardJSON(ctx)
	if err != nil || len(card.SecuritySchemes) == 0 {
		return data, err
	}
	var both map[string]any
	var v1 map[string]map[string]any
	b, err := json.Marshal(card.SecuritySchemes)
	if err == nil {
		err = json.Unmarshal(b, &v1)
	}
	if err == nil {
		err = json.Unmarshal(data, &both)
	}
	if err != nil {
		return nil, err
	}
	schemes, _ := both["securitySchemes"].(map[string]any)
	for name, scheme := range schemes {
		if m, ok := scheme.(map[string]any); ok {
			maps.Copy(m, v1[name])
		}
	}
	return json.Marshal(both)
}

// baseURL is the URL clients reach the server at: Config.BaseURL, or
// the one the request was sent to (behind a proxy that terminates TLS,
// its X-Forwarded-Proto says https).
func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.BaseURL != "" {
		return strings.TrimSuffix(s.cfg.BaseURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return scheme + "://" + r.Host
}

// cardOf is a's A2A card, its JSON-RPC endpoint at endpoint (protocol
// 1.0 and 0.3 alike). The agent is one skill: A2A messages carry no
// choice of skill, and each served agent is an A2A agent of its own.
func (s *Server) cardOf(a *agent.Agent, endpoint string) *a2a.AgentCard {
	sp := a.Spec()
	desc := sp.Description
	if desc == "" {
		desc = fmt.Sprintf("The agentry agent %s@%s.", sp.AgentName, sp.Version)
	}
	out := []string{"text/plain"}
	if len(sp.OutputSchema) > 0 {
		out = append(out, "application/json")
	}
	card := &a2a.AgentCard{
		Name: sp.AgentName, Description: desc, Version: sp.Version,
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: endpoint, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
			{URL: endpoint, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: out,
		Skills: []a2a.AgentSkill{{ID: sp.AgentName, Name: sp.AgentName, Description: desc + " " + skillIO(&sp),
			Tags: []string{"agentry", string(sp.Mode)}}},
	}
	if card.Skills[0].Tags[1] == "" {
		card.Skills[0].Tags = card.Skills[0].Tags[:1]
	}
	if len(s.cfg.Keys) > 0 {
		card.SecuritySchemes = a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: "an agentry key (Authorization: Bearer KEY): the role runner sends messages and cancels tasks, viewer reads tasks"}}
		card.SecurityRequirements = a2a.SecurityRequirementsOptions{{"bearer": {}}}
	}
	return card
}

// skillIO says what the agent takes from a message and what its answer
// holds.
func skillIO(sp *spec.Spec) string {
	var b strings.Builder
	switch {
	case len(sp.InputSchema) == 0 && len(sp.InputKeys) == 1:
		fmt.Fprintf(&b, "Input: the message's text, as %q.", sp.InputKeys[0])
	case len(sp.InputSchema) == 0 && len(sp.InputKeys) == 0:
		b.WriteString(`Input: the message's text, as "task" (or a JSON object of the agent's input).`)
	default:
		fmt.Fprintf(&b, "Input: a JSON object, as a data part or as the message's text, of the JSON Schema %s.", sp.InputJSONSchema())
	}
	if len(sp.OutputSchema) > 0 {
		fmt.Fprintf(&b, " Output: an artifact with the answer as JSON text and as a data part, of the JSON Schema %s.", sp.OutputSchema)
	} else {
		b.WriteString(" Output: an artifact with the answer as text.")
	}
	return b.String()
}
