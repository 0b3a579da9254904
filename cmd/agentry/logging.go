package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// newLogger returns the logger of --log-level and --log-format, writing to
// stderr, or nil when logging is off. Logs are off unless one of the flags
// (or AGENTRY_LOG_LEVEL / AGENTRY_LOG_FORMAT) asks for them: the progress
// lines already tell a person at a terminal what happens, and two streams
// interleaved on stderr help nobody. A format alone logs at info.
func newLogger(level, format string, stderr io.Writer) (*slog.Logger, error) {
	if level == "" && format == "" {
		return nil, nil
	}
	var lv slog.Level
	switch strings.ToLower(level) {
	case "", "info":
		lv = slog.LevelInfo
	case "debug":
		lv = slog.LevelDebug
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	case "off", "none":
		return nil, nil
	default:
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn, error or off", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "", "text":
		return slog.New(slog.NewTextHandler(stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json or text", format)
}
