package event

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
)

// JSONLines returns a subscriber that writes each event as one line of
// JSON to w. Write errors are counted, not returned: see the returned
// func's second result.
func JSONLines(w io.Writer) (fn func(Event), errs func() error) {
	var mu sync.Mutex
	var first error
	enc := json.NewEncoder(w)
	return func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			if err := enc.Encode(e); err != nil && first == nil {
				first = err
			}
		}, func() error {
			mu.Lock()
			defer mu.Unlock()
			return first
		}
}

// Slog returns a subscriber that logs each event to l at debug level
// (errors at error level).
func Slog(l *slog.Logger) func(Event) {
	return func(e Event) {
		level := slog.LevelDebug
		attrs := []slog.Attr{slog.String("run_id", e.RunID), slog.String("agent", e.AgentName), slog.Int("turn", e.Turn)}
		if e.Tool != nil {
			attrs = append(attrs, slog.String("tool", e.Tool.Name), slog.String("call_id", e.Tool.ID))
			if e.Tool.Status != "" {
				attrs = append(attrs, slog.String("status", e.Tool.Status), slog.Float64("duration_ms", e.Tool.DurationMS))
			}
		}
		if e.Error != nil {
			level = slog.LevelError
			attrs = append(attrs, slog.String("code", e.Error.Code), slog.String("error", e.Error.Message))
		}
		l.LogAttrs(context.Background(), level, "agentry "+string(e.Type), attrs...)
	}
}
