package server

import (
	"encoding/json"
	"sync"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
)

// relay carries the answer of a conversation's run to its event streams
// as the model writes it: content_chunk events are not in the run's log
// (a reply is whole in its model call), so a stream gets them from the
// run itself while this server drives it. Each stream first gets what
// was written so far, one chunk a turn, then each chunk as it comes;
// chunks have no event id (they are not resumable: the Result holds the
// answer).
type relay struct {
	mu    sync.Mutex
	turns []chunk // what was written, a chunk a turn
	subs  map[chan []byte]bool
}

// chunk is a turn's text so far.
type chunk struct {
	turn int
	text []byte
}

// listen is the run option that feeds r: the run's own content chunks.
func (r *relay) listen() agent.RunOption {
	return agent.WithEvents(func(e event.Event) {
		if e.ParentRunID != "" {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if n := len(r.turns); n == 0 || r.turns[n-1].turn != e.Turn {
			r.turns = append(r.turns, chunk{turn: e.Turn})
		}
		last := &r.turns[len(r.turns)-1]
		last.text = append(last.text, e.Content...)
		data := chunkEvent(e.RunID, e.Turn, e.Content)
		for ch := range r.subs {
			select {
			case ch <- data:
			default: // a stream that does not keep up loses chunks, not the run's pace
			}
		}
	}, event.Types(event.ContentChunk), event.Inline()) // inline: a chunk is relayed before the run's next record is written
}

// subscribe returns a channel of the run's chunks as SSE data, the text
// so far first, and what ends the subscription.
func (r *relay) subscribe(runID string) (<-chan []byte, func()) {
	r.mu.Lock()
	ch := make(chan []byte, len(r.turns)+256)
	for _, c := range r.turns {
		ch <- chunkEvent(runID, c.turn, string(c.text))
	}
	if r.subs == nil {
		r.subs = map[chan []byte]bool{}
	}
	r.subs[ch] = true
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		delete(r.subs, ch)
		r.mu.Unlock()
	}
}

// chunkEvent is a content_chunk event as a stream writes it.
func chunkEvent(runID string, turn int, content string) []byte {
	data, _ := json.Marshal(map[string]any{"type": string(event.ContentChunk), "run_id": runID, "turn": turn, "content": content})
	return data
}

// relayOf is the relay of a run this server drives, or nil.
func (s *Server) relayOf(runID string) *relay {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.relays[runID]
}

// relaying keeps r as runID's relay while this server drives the run
// (undrive lets it go).
func (s *Server) relaying(runID string, r *relay) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.relays == nil {
		s.relays = map[string]*relay{}
	}
	s.relays[runID] = r
}
