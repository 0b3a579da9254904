package testdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Redis returns the URL of the test server scripts/test-deps.sh started
// (AGENTRY_TEST_REDIS), with a key prefix of the test's own whose keys
// are deleted when the test ends. Without a server it skips the test, or
// fails it when AGENTRY_REQUIRE_SERVICES is set.
func Redis(t testing.TB) string {
	t.Helper()
	base := os.Getenv("AGENTRY_TEST_REDIS")
	if base == "" {
		missing(t, "AGENTRY_TEST_REDIS is not set", "starts Redis")
	}
	prefix := "t_" + strconv.FormatUint(rand.Uint64(), 36) + ":"
	t.Cleanup(func() {
		opts, err := goredis.ParseURL(base)
		if err != nil {
			return
		}
		c := goredis.NewClient(opts)
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return base + "?prefix=" + prefix
}

// RedisServer is a Redis server of the test's own, which it may stop and
// start again: append-only, fsync on every write, in a temporary
// directory, on a free loopback port that stays the same across restarts.
type RedisServer struct {
	URL  string
	t    testing.TB
	dir  string
	port int
	cmd  *exec.Cmd
}

// StartRedis starts a private Redis server (redis-server from PATH, as
// scripts/test-deps.sh installs it), stopped when the test ends.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		missing(t, "redis-server is not installed", "installs it")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &RedisServer{t: t, dir: t.TempDir(), port: port, URL: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start starts the server (again) and waits until it answers.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--dir", s.dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--logfile", filepath.Join(s.dir, "redis.log"))
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	opts, _ := goredis.ParseURL(s.URL)
	c := goredis.NewClient(opts)
	defer c.Close()
	for range 100 {
		if c.Ping(context.Background()).Err() == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	s.t.Fatalf("redis-server did not answer on port %d:\n%s", s.port, log)
}

// Stop kills the server, as a crash would.
func (s *RedisServer) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}
