package server

import (
	"context"
	"net/http"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
)

// launch is a run the server starts for a request, on any of its entry
// points (POST /v1/runs, chat completions, AG-UI, A2A, MCP): what differs
// between them is here, and how a run is started (in the store, for the
// caller, with the caller's trace) is written once, in start.
type launch struct {
	agent *agent.Agent
	owned bool // the run closes the agent when it ends
	input map[string]any
	// user is the user the run acts for when the caller has no name of
	// its own (a server without keys): the request's "user".
	user     string
	session  string            // the protocol's session (an AG-UI thread, an A2A context)
	metadata map[string]string // kept with the run
	trace    traceContext      // the caller's W3C trace context
	listen   agent.RunOption   // the protocol's listener to the run's events; nil: none
	joined   agent.RunOption   // a listener of the run's start in its conversation; nil: none
	// begun is told the run's id before the run starts (a listener that
	// keeps only the run's own events needs it first).
	begun func(runID string)
	// conversation is the conversation the run is part of; "": none.
	conversation string
	// noStore runs it kept nowhere (a response with store false).
	noStore bool
	// history is what was said before the run, as the request gives it
	// (a stateless protocol's earlier messages); nil: none.
	history []llm.Message
	// instructions are the caller's, for this run only; "": none.
	instructions string
	// choice is the tool choice of the run's model (WithToolChoice); "":
	// the model's.
	choice string
	// relay carries the run's answer to its event streams as it is
	// written; nil: none.
	relay *relay
}

// start takes a slot for l's run (slot takes it, or says why not), makes
// its session and starts it in the background as the caller of ctx,
// after track agrees (nil: always; false: the run is not to go, its
// slot is given back). The channel gets its Result. A refusal's status
// and message are the caller's to write, in its protocol's shape.
func (s *Server) start(ctx context.Context, l *launch, slot func() *refusal, track func(*agent.Session) bool) (*agent.Session, <-chan any, *refusal) {
	if rf := slot(); rf != nil {
		if l.owned {
			l.agent.Close()
		}
		return nil, nil, rf
	}
	sess, err := l.agent.NewSession(l.input, s.runOptions(ctx, l)...)
	if err != nil {
		s.release()
		if l.owned {
			l.agent.Close()
		}
		return nil, nil, &refusal{http.StatusBadRequest, "invalid_input", err.Error()}
	}
	if l.begun != nil {
		l.begun(sess.RunID())
	}
	if track != nil && !track(sess) {
		s.release()
		if l.owned {
			l.agent.Close()
		}
		return sess, nil, nil
	}
	if l.relay != nil {
		s.relaying(sess.RunID(), l.relay)
	}
	return sess, s.background(sess, l.agent, l.owned, callerOf(ctx).principal()), nil
}

// runOptions are the options of l's run: stored, with its listener, and
// its session's (sessionOptions).
func (s *Server) runOptions(ctx context.Context, l *launch) []agent.RunOption {
	opts := sessionOptions(ctx, l)
	if !l.noStore {
		opts = append(opts, agent.WithStore(s.cfg.Store))
	}
	for _, o := range []agent.RunOption{l.listen, l.joined} {
		if o != nil {
			opts = append(opts, o)
		}
	}
	if l.conversation != "" {
		opts = append(opts, agent.WithConversation(l.conversation))
	}
	if l.history != nil {
		opts = append(opts, agent.WithHistory(l.history...))
	}
	if l.relay != nil {
		opts = append(opts, l.relay.listen())
	}
	if l.choice != "" {
		opts = append(opts, agent.WithToolChoice(l.choice))
	}
	if l.instructions != "" {
		opts = append(opts, agent.WithInstructions(l.instructions))
	}
	return opts
}

// sessionOptions are what every run a request starts is given, an
// agent's or a pipeline's stages': its user, session, metadata and trace.
func sessionOptions(ctx context.Context, l *launch) []agent.RunOption {
	var opts []agent.RunOption
	if l.user != "" && callerOf(ctx).user == "" {
		opts = append(opts, agent.WithUser(l.user)) // a key acts for its own name
	}
	if l.session != "" {
		opts = append(opts, agent.WithSessionID(l.session))
	}
	if len(l.metadata) > 0 {
		opts = append(opts, agent.WithMetadata(l.metadata))
	}
	if l.trace.parent != "" {
		opts = append(opts, agent.WithTraceContext(l.trace.parent, l.trace.state))
	}
	return opts
}
