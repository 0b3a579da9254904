// The A2A endpoint: each served agent is an A2A agent,
// its card at GET /a2a/{agent}/.well-known/agent-card.json and its
// JSON-RPC endpoint at POST /a2a/{agent}; GET /.well-known/agent-card.json
// and POST /a2a are the default agent's. Each endpoint speaks A2A 1.0 and
// 0.3 on one request handler of the A2A Go SDK, and each A2A task is an
// ordinary stored run (docs/protocols.md#a2a).

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentry/agentry/agent"
)

// a2aSide is the server's A2A handlers: the SDK's JSON-RPC bindings of
// protocol 1.0 and 0.3 over one request handler, which keeps the tasks.
type a2aSide struct {
	v1, v0 http.Handler
}

// a2aRoutes registers the A2A routes.
func (s *Server) a2aRoutes() {
	logger := s.cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	recovered := func(r any) error {
		// The SDK re-panics without a handler: a panic becomes an error
		// answer, never a crashed server.
		return a2a.NewError(a2a.ErrInternalError, fmt.Sprintf("internal error: %v", r))
	}
	tasks := newA2ATasks()
	h := a2asrv.NewHandler(&a2aExecutor{s: s, runs: map[a2a.TaskID]*a2aRun{}},
		a2asrv.WithLogger(logger), a2asrv.WithCallInterceptors(a2aCaller{}),
		a2asrv.WithExecutionPanicHandler(recovered), a2asrv.WithTaskStore(tasks),
		a2asrv.WithCapabilityChecks(&a2a.AgentCapabilities{Streaming: true}))
	auth := a2aHandler{s: s, h: h, tasks: tasks}
	opts := []a2asrv.TransportOption{a2asrv.WithTransportPanicHandler(recovered), a2asrv.WithTransportKeepAlive(s.heartbeat)}
	s.a2a = &a2aSide{v1: a2asrv.NewJSONRPCHandler(auth, opts...), v0: a2av0.NewJSONRPCHandler(auth, opts...)}
	s.public("GET /.well-known/agent-card.json", s.a2aCard)
	s.public("GET /a2a/{agent}/.well-known/agent-card.json", s.a2aCard)
	s.routeWith("POST /a2a", RoleViewer, writeA2AError, s.a2aPost)
	s.routeWith("POST /a2a/{agent}", RoleViewer, writeA2AError, s.a2aPost)
}

// public serves pattern to anyone, but, on a server without keys, only
// to its own pages (sameOrigin): an agent card tells a client how to
// authenticate, so it needs no key.
func (s *Server) public(pattern string, h http.HandlerFunc) {
	s.patterns = append(s.patterns, pattern)
	s.mux.HandleFunc(pattern, s.logged(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := s.sameOrigin(r); err != nil {
			writeError(w, http.StatusForbidden, "forbidden", err.Error())
			return
		}
		h(w, r)
	}))
}

// a2aAgent is the agent a request's path names (the default agent for
// the routes without one), its name as served, or why there is none.
func (s *Server) a2aAgent(r *http.Request) (*agent.Agent, string, error) {
	name := r.PathValue("agent")
	if name == "" {
		name = s.cfg.A2AAgent
		if name == "" {
			names := s.agentNames()
			if len(names) != 1 {
				return nil, "", fmt.Errorf("this server serves %d agents and none is its default A2A agent (Config.A2AAgent, agentry serve --a2a-agent): "+
					"each agent's card is at /a2a/NAME/.well-known/agent-card.json (agents: %s)", len(names), strings.Join(names, ", "))
			}
			name = names[0]
		}
	}
	a, err := s.cfg.Agents.Get(name)
	if err != nil {
		return nil, "", fmt.Errorf("agent %q: no such agent is served (GET /v1/agents lists them)", name)
	}
	return a, name, nil
}

// agentNames are the names of the served agents, each once.
func (s *Server) agentNames() []string {
	var names []string
	for _, a := range s.cfg.Agents.Agents() {
		if n := a.Spec().AgentName; len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n)
		}
	}
	return names
}

// a2aPost serves a JSON-RPC request to the agent the path names, in the
// protocol version it speaks: 0.3's methods are named "message/send",
// 1.0's "SendMessage", and a client may say which with A2A-Version. What
// the caller may do is decided by a2aHandler, on the request the SDK
// decoded and executes; here the body is only checked to be one JSON-RPC
// object (trailing bytes, which the SDK would ignore, are refused) and
// its method read to pick the version's binding.
func (s *Server) a2aPost(w http.ResponseWriter, r *http.Request) {
	a, name, err := s.a2aAgent(r)
	if err != nil {
		writeA2AError(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	data, err := bodyOf(r)
	if err != nil {
		writeA2ABodyError(w, err)
		return
	}
	method, err := rpcMethod(data)
	if err != nil {
		writeA2AError(w, http.StatusBadRequest, "parse_error", err.Error())
		return
	}
	legacy, err := a2aLegacy(r.Header.Get(a2a.SvcParamVersion), method)
	if err != nil {
		writeA2AError(w, http.StatusBadRequest, "version_not_supported", err.Error())
		return
	}
	reply := &a2aReply{}
	ctx := context.WithValue(r.Context(), a2aTargetKey{}, &a2aTarget{agent: a, name: name, trace: traceOf(r)})
	r = r.WithContext(context.WithValue(ctx, a2aReplyKey{}, reply))
	r.Body = io.NopCloser(bytes.NewReader(data))
	aw := &a2aWriter{ResponseWriter: w, reply: reply}
	defer aw.commit() // a handler that wrote nothing still answers its status
	if legacy {
		s.a2a.v0.ServeHTTP(aw, r)
	} else {
		s.a2a.v1.ServeHTTP(aw, r)
	}
}

// rpcMethod is the method of a JSON-RPC request body, which must be one
// JSON object and nothing after it.
func rpcMethod(data []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var head struct {
		Method string `json:"method"`
	}
	if err := dec.Decode(&head); err != nil {
		return "", fmt.Errorf("the body is not a JSON-RPC request: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", errors.New("the body has more after its JSON-RPC request: send one request, and nothing after it")
	}
	if head.Method == "" {
		return "", errors.New(`the JSON-RPC request names no "method"`)
	}
	return head.Method, nil
}

// a2aLegacy says whether a request speaks A2A 0.3, by its A2A-Version
// header or, without one, by its method's name; a version this server
// does not speak is an error naming the ones it does.
func a2aLegacy(version, method string) (bool, error) {
	switch {
	case version == "":
		return strings.Contains(method, "/"), nil
	case version == "0.3" || strings.HasPrefix(version, "0.3."):
		return true, nil
	case version == "1" || strings.HasPrefix(version, "1."):
		return false, nil
	}
	return false, fmt.Errorf("A2A-Version %q: this server speaks A2A 1.0 and 0.3", version)
}

// a2aTarget is what a request's context tells the executor: the agent
// the path names, and the caller's trace.
type a2aTarget struct {
	agent *agent.Agent
	name  string
	trace traceContext
}

type a2aTargetKey struct{}

// a2aSlot is the run slot a request took for the run it may start:
// claimed once, by the run's executor or, when no run took it, by the
// request, which gives it back.
type a2aSlot struct{ claimed atomic.Bool }

type a2aSlotKey struct{}

func (t *a2aSlot) claim() bool { return t != nil && t.claimed.CompareAndSwap(false, true) }

// claimSlot takes the slot the request took for a run, or, when it was
// let go (the request ended before the executor began), a new one.
func (s *Server) claimSlot(ctx context.Context) *refusal {
	if slot, _ := ctx.Value(a2aSlotKey{}).(*a2aSlot); slot.claim() {
		return nil
	}
	return s.admitted()
}

// a2aCaller tells the SDK who calls: the key's name (the tasks it lists
// are the caller's), "anonymous" on a server without keys.
type a2aCaller struct {
	a2asrv.PassthroughCallInterceptor
}

func (a2aCaller) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	cc.User = a2asrv.NewAuthenticatedUser(a2aName(callerOf(ctx).user), nil)
	return ctx, nil, nil
}

// a2aName is the name the SDK knows a user by: "anonymous" for the local
// operator of a server without keys.
func a2aName(user string) string {
	if user == "" {
		return "anonymous"
	}
	return user
}

// structType is the type of the data entry that holds agentry's code in
// an A2A error, as the SDK writes an error's details.
const structType = "type.googleapis.com/google.protobuf.Struct"

// writeA2AError writes an error the server answers before the SDK reads
// the request, in JSON-RPC's shape with the fitting HTTP status:
// {"jsonrpc": "2.0", "id": null, "error": {"code", "message", "data":
// [{"@type": structType, "code"}]}}, the JSON-RPC code the one A2A gives
// the problem and data's code agentry's, as the SDK writes the details
// of the errors agentry's request handler gives it.
func writeA2AError(w http.ResponseWriter, status int, code, message string) {
	rpc := -32600 // invalid request
	switch status {
	case http.StatusUnauthorized:
		rpc = -31401
	case http.StatusForbidden:
		rpc = -31403
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusInternalServerError:
		rpc = -32000 // server error
	}
	switch code {
	case "version_not_supported":
		rpc = -32009
	case "parse_error":
		rpc = -32700
	}
	writeJSON(w, status, map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": rpc, "message": message, "data": []any{map[string]string{"@type": structType, "code": code}}}})
}

// writeA2ABodyError answers a body that could not be read, as
// writeBodyError does, in JSON-RPC's shape.
func writeA2ABodyError(w http.ResponseWriter, err error) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, errMediaType):
		writeA2AError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", err.Error())
	case errors.As(err, &tooBig):
		writeA2AError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", tooBig.Limit))
	default:
		writeA2AError(w, http.StatusBadRequest, "invalid_request", err.Error())
	}
}
