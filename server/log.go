package server

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/agentry/agentry/internal/telemetry"
	"github.com/agentry/agentry/policy"
)

// logged is what the server's logger records of an API request: one
// record when it is answered (an event stream: when it ends), with its
// route, status, duration, caller and trace.
func (s *Server) logged(pattern string, h http.HandlerFunc) http.HandlerFunc {
	l := s.cfg.Logger
	if l == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if !l.Enabled(r.Context(), slog.LevelInfo) {
			h(w, r)
			return
		}
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		h(rec, r)
		attrs := []slog.Attr{slog.String("route", pattern), slog.String("path", r.URL.Path), slog.Int("status", rec.status),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000)}
		if p := policy.PrincipalFrom(r.Context()); p != nil && p.UserID != "" {
			attrs = append(attrs, slog.String("user_id", p.UserID))
		}
		if id := r.PathValue("id"); id != "" {
			attrs = append(attrs, slog.String("run_id", id))
		}
		if sc, ok := telemetry.Parse(r.Header.Get("Traceparent"), ""); ok {
			attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
		level := slog.LevelInfo
		if rec.status >= 500 {
			level = slog.LevelError
		}
		l.LogAttrs(r.Context(), level, "request", attrs...)
	}
}

// statusWriter keeps the status a handler answered; Unwrap lets
// http.ResponseController reach the connection (an event stream's
// flushes and deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
