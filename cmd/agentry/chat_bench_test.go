package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkChatFirstCharacter: agentry chat's time from Enter to the
// first character of the answer on stdout, with a zero-latency scripted
// model and the run store on SQLite, each message one more run of the
// same conversation.
func BenchmarkChatFirstCharacter(b *testing.B) {
	dir := b.TempDir()
	var turns []string
	for i := range 5000 {
		turns = append(turns, fmt.Sprintf(`{"content": "Answer %d, and a few words after it."}`, i))
	}
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [`+strings.Join(turns, ",")+`]}`), 0o600)
	spec := filepath.Join(dir, "agent.json")
	os.WriteFile(spec, []byte(`{"agent_name": "chat", "version": "v1", "model_name": "scripted:turns.json", "system_text": "Chat.",
		"user_text": "${message}", "input_keys": ["message"]}`), 0o600)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- chat(context.Background(), spec, runFlags{agents: "agents", db: filepath.Join(dir, "runs.db"), quiet: true}, "", inR, outW, io.Discard)
		outW.Close()
	}()
	first := make(chan struct{}, 1)
	go func() { // each answer's first byte, then the rest of its line
		buf := make([]byte, 1)
		inLine := false
		for {
			if _, err := outR.Read(buf); err != nil {
				return
			}
			if !inLine {
				first <- struct{}{}
				inLine = true
			}
			if buf[0] == '\n' {
				inLine = false
			}
		}
	}()
	var total time.Duration
	n := 0
	for b.Loop() {
		if n >= 4000 {
			b.Skip("the script is spent")
		}
		start := time.Now()
		fmt.Fprintf(inW, "Message %d\n", n)
		<-first
		total += time.Since(start)
		n++
	}
	b.ReportMetric(float64(total.Microseconds())/float64(n)/1000, "ms/first-char")
	inW.Close()
	<-done
}
