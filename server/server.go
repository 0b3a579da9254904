// Package server serves agents over HTTP: runs created
// by agent name or inline spec, read and listed from the run store, their
// events streamed live as server-sent events cut from the store (so a
// client resumes exactly, with Last-Event-ID, after a restart too), and
// aborted. A run never depends on its client: it goes on when the client
// disconnects.
//
// A Server is an http.Handler. It authenticates callers by bearer key,
// each with a role (viewer reads, runner also creates and aborts runs of
// named agents, admin also runs inline specs); with no keys every caller
// is an admin, and the binary then listens on loopback only.
package server

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

// Config is what a Server serves and how.
type Config struct {
	// Store keeps every run; required.
	Store store.Store
	// Agents are the agents served by name ("NAME" or "NAME@VERSION").
	Agents *agent.Registry
	// Pipelines are the pipelines served by name ("NAME", or
	// "NAME@VERSION" when several versions are served). The server does
	// not close them.
	Pipelines []*pipeline.Pipeline
	// AgentOptions build the agents of inline specs (tools, models).
	AgentOptions []agent.Option
	// Models are the models a request may name besides each served
	// agent's own model_name and fallback_models ("model" of POST
	// /v1/runs), and the only ones an inline spec may name. A request
	// never names any other: no "scripted:" file, no base_url.
	Models []string
	// Create says which roles may bring agents and tools into being
	// through the server: build an inline spec, and resume or decide a
	// run of one, with its connectors, MCP servers, remote agents and
	// tools (see policy.Creation). Roles are the keys' (viewer, runner,
	// admin) and "*"; a rule naming a role admits the roles above it.
	// What no glob names is an admin's (unless the rules give "*"), so
	// nil lets only an admin. The served agents are the host's, never
	// checked.
	Create policy.Creation
	// Keys are the bearer keys callers present; none: no authentication.
	// A key's name is the user it acts for: the runs it creates are that
	// user's, and it reaches only that user's (Key.AllUsers: everyone's).
	Keys []Key
	// MaxRuns bounds the runs going at once (429 beyond); 0 is 64.
	MaxRuns int
	// MaxStreams bounds the event streams open at once (429 beyond): each
	// reads the store while its run goes. 0 is 1,024.
	MaxStreams int
	// MaxBody caps a request's body in bytes (413 beyond); 0 is 1 MiB.
	MaxBody int64
	// EncryptionKey opens the run logs its agents seal (32 bytes, the
	// key they were built with: agent.WithEncryptionKey); nil: logs are
	// read as they are, and a sealed one is refused.
	EncryptionKey []byte
	// Logger receives a record of each API request answered (route,
	// status, duration, caller, run and trace ids); nil: none. Runs log
	// through their agents' loggers (agent.WithLogger).
	Logger *slog.Logger
	// Prompts are the prompt templates the MCP server offers as prompts;
	// nil offers none.
	Prompts prompt.Store
	// Version is the server's version, as MCP clients are told it.
	Version string
	// A2AAgent is the agent ("NAME" or "NAME@VERSION") whose A2A card
	// is the server's well-known one and who answers POST /a2a; "": the
	// only agent served, if there is one. Every agent is also served at
	// /a2a/NAME.
	A2AAgent string
	// Remote, when set, runs the agents elsewhere (agentry worker, on
	// Temporal): runs start there, are followed in Store, and are
	// decided and aborted through it. nil: runs go in this process.
	Remote Remote
	// BaseURL is the URL clients reach the server at ("https://host" or
	// with a path prefix), for the URLs of the A2A cards; "": the URL the
	// card was asked for (its Host, and X-Forwarded-Proto).
	BaseURL string
}

// Server serves agents over HTTP. Its zero value is not usable: use New.
type Server struct {
	cfg      Config
	mux      *http.ServeMux
	patterns []string        // the API's routes, as registered
	pages    []string        // the viewer's routes (not the API's)
	sums     [][]byte        // the keys' hashes, decoded
	seal     *runlog.Sealer  // opens sealed run logs; nil: none
	create   policy.Creation // Config.Create over the server's last rule
	slots    chan struct{}   // one per run going
	streams  chan struct{}   // one per event stream open

	mu       sync.Mutex
	runs     map[string]stopper // the runs this server drives, by id
	started  map[string]string  // the runs the Remote drives that this server started, until they stop: their conversation, or ""
	relays   map[string]*relay  // the relays of runs this server drives that stream their answer
	lines    map[string]*line   // the messages waiting for a busy conversation, by conversation
	stopping bool               // Close began

	heartbeat time.Duration // how often a quiet event stream gets a comment
	a2a       *a2aSide      // the A2A endpoint's handlers
	wg        sync.WaitGroup
	remotes   sync.WaitGroup  // the goroutines holding slots of runs the Remote drives
	closing   chan struct{}   // closed when Close begins: streams of runs others drive end
	base      context.Context // the runs' context: cancelled by Close
	close     context.CancelFunc

	mcpOnce  sync.Once
	mcp      *sdk.Server // the MCP server, built on first use
	mcpLists mcpLists    // what it offers
}

// New returns a Server for c.
func New(c Config) (*Server, error) {
	if c.Store == nil {
		return nil, errors.New("server: Config.Store is required")
	}
	if c.Agents == nil {
		c.Agents = agent.NewRegistry()
	}
	if c.MaxRuns <= 0 {
		c.MaxRuns = 64
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = 1024
	}
	if c.MaxBody <= 0 {
		c.MaxBody = 1 << 20
	}
	s := &Server{cfg: c, mux: http.NewServeMux(), slots: make(chan struct{}, c.MaxRuns), streams: make(chan struct{}, c.MaxStreams), runs: map[string]stopper{},
		heartbeat: heartbeatEvery, closing: make(chan struct{})}
	var err error
	if s.sums, err = keySums(c.Keys); err != nil {
		return nil, err
	}
	if err := checkCreation(c.Create); err != nil {
		return nil, err
	}
	s.create = creationRules(c.Create)
	if c.EncryptionKey != nil {
		seal, err := runlog.NewSealer(c.EncryptionKey)
		if err != nil {
			return nil, fmt.Errorf("server: EncryptionKey: %w", err)
		}
		s.seal = seal
	}
	v, err := loadViewer()
	if err != nil {
		return nil, fmt.Errorf("server: the viewer's files: %w", err)
	}
	s.base, s.close = context.WithCancel(context.Background())
	s.apiRoutes()
	s.a2aRoutes()
	s.open("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.open("GET /readyz", s.ready)
	s.open("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(openAPI)
	})
	// The trace viewer: a page and its files, served to anyone (they hold
	// no data); not API routes, so not in the OpenAPI document.
	s.page("GET /{$}", v.index)
	s.page("GET /viewer/{file}", v.file)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return s, nil
}

// apiRoutes serves the API's routes, each to the role it needs.
func (s *Server) apiRoutes() {
	s.route("POST /v1/runs", RoleRunner, s.createRun)
	s.route("GET /v1/runs", RoleViewer, s.listRuns)
	s.route("GET /v1/runs/{id}", RoleViewer, s.getRun)
	s.route("GET /v1/runs/{id}/events", RoleViewer, s.events)
	s.route("POST /v1/runs/{id}/abort", RoleRunner, s.abort)
	s.route("POST /v1/runs/{id}/resume", RoleRunner, s.resume)
	s.route("GET /v1/runs/{id}/audit", RoleViewer, s.audit)
	s.route("GET /v1/evals", RoleViewer, s.listEvals)
	s.route("GET /v1/evals/{id}", RoleViewer, s.getEval)
	s.route("GET /v1/evals/{id}/compare/{baseline}", RoleViewer, s.compareEvals)
	s.route("GET /v1/agents", RoleViewer, s.listAgents)
	s.route("POST /v1/conversations", RoleRunner, s.createConversation)
	s.route("GET /v1/conversations", RoleViewer, s.listConversations)
	s.route("GET /v1/conversations/{id}", RoleViewer, s.getConversation)
	s.route("DELETE /v1/conversations/{id}", RoleRunner, s.deleteConversation)
	s.route("POST /v1/conversations/{id}/messages", RoleRunner, s.postMessage)
	s.route("POST /v1/conversations/{id}/fork", RoleRunner, s.forkConversation)
	s.route("GET /v1/whoami", RoleViewer, s.whoami)
	s.route("POST /ag-ui/{agent}", RoleRunner, s.agui)
	s.routeWith("POST /v1/chat/completions", RoleRunner, writeOpenAIError, s.chatCompletions)
	s.routeWith("POST /v1/responses", RoleRunner, writeOpenAIError, s.createResponse)
	s.routeWith("GET /v1/responses/{id}", RoleViewer, writeOpenAIError, s.getResponse)
	s.routeWith("POST /v1/responses/{id}/cancel", RoleRunner, writeOpenAIError, s.cancelResponse)
	s.routeWith("DELETE /v1/responses/{id}", RoleRunner, writeOpenAIError, s.deleteResponse)
	s.routeWith("GET /v1/models", RoleViewer, writeOpenAIError, s.models)
	s.route("POST /mcp", RoleRunner, s.mcpHTTP().ServeHTTP)
	// Stateless: no stream to GET, no session to DELETE (the protocol's
	// answer to both is 405).
	s.open("GET /mcp", mcpNotAllowed)
	s.open("DELETE /mcp", mcpNotAllowed)
}

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close lets the runs the server drives go on until ctx is done, then
// interrupts those still going (each stops at its next durable point,
// kept unended, reported interrupted: ResumeInterrupted finishes them
// later) and waits for them to stop, at most stopGrace more.
//
// The event streams of runs the server does not drive (another server's,
// or the Remote's) end at once: their clients resume them elsewhere, or
// after the restart, with Last-Event-ID.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.stopping {
		s.stopping = true // no run starts from now on: 503
		close(s.closing)
	}
	s.mu.Unlock()
	defer s.remotes.Wait()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		s.close()
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	for _, run := range s.runs {
		run.Interrupt()
	}
	s.mu.Unlock()
	s.close()
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-grace.C:
		return fmt.Errorf("server: runs still going %s after their abort: %w", stopGrace, ctx.Err())
	}
}

// stopper is a run this server drives: an agent's Session, or a
// pipeline's run.
type stopper interface {
	Abort()
	Interrupt()
}

// stopGrace is how long Close waits for aborted runs to end.
const stopGrace = 10 * time.Second

// openAPI is the OpenAPI 3.1 document of the routes, served at
// /openapi.json; a test checks every route and response against it.
//
//go:embed openapi.json
var openAPI []byte

// open serves pattern to anyone.
func (s *Server) open(pattern string, h http.HandlerFunc) {
	s.patterns = append(s.patterns, pattern)
	s.mux.HandleFunc(pattern, h)
}

// page serves a route of the viewer to anyone.
func (s *Server) page(pattern string, h http.HandlerFunc) {
	s.pages = append(s.pages, pattern)
	s.mux.HandleFunc(pattern, h)
}

// route serves pattern to callers whose role is at least min.
func (s *Server) route(pattern string, min Role, h func(http.ResponseWriter, *http.Request)) {
	s.routeWith(pattern, min, writeError, h)
}

// routeWith is route with the errors of the caller's refusal written by
// fail (an OpenAI-compatible route writes them in OpenAI's shape).
func (s *Server) routeWith(pattern string, min Role, fail failFunc, h func(http.ResponseWriter, *http.Request)) {
	s.patterns = append(s.patterns, pattern)
	s.mux.HandleFunc(pattern, s.logged(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := s.sameOrigin(r); err != nil {
			fail(w, http.StatusForbidden, "forbidden", err.Error())
			return
		}
		c, aerr := s.authenticate(r)
		if aerr != nil {
			if aerr.status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="agentry"`)
			}
			fail(w, aerr.status, codeOf(aerr.status), aerr.msg)
			return
		}
		if !c.at(min) {
			fail(w, http.StatusForbidden, "forbidden", fmt.Sprintf("this needs the role %s", min))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
		// The caller, decided here once, and the principal its runs act
		// as (the log record names it too).
		ctx := context.WithValue(r.Context(), callerKey{}, c)
		*r = *r.WithContext(policy.WithPrincipal(ctx, c.principal()))
		h(w, r)
	}))
}

// ready says whether the store answers.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if _, err := s.cfg.Store.List(r.Context(), store.Filter{Limit: 1}); err != nil {
		writeError(w, http.StatusServiceUnavailable, "store_error", "the run store does not answer")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// writeJSON writes v as the response, with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	// A client that stops reading a large answer is let go: the server
	// sets no write timeout of its own, which would cut event streams.
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// writeError writes {"error": {"code", "message"}} with status.
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": message}})
}

// codeOf is the error code of an HTTP status.
func codeOf(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	}
	return "error"
}
