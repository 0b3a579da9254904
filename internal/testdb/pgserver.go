package testdb

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// PostgresServer is a Postgres server of the test's own, which it may
// stop (as a crash would) and start again, on the same port.
type PostgresServer struct {
	URL  string
	t    testing.TB
	bin  string
	dir  string
	port int
	run  []string // runs a command as the postgres user when root
}

// StartPostgres initializes and starts a private Postgres server (from
// the packages scripts/test-deps.sh installs), stopped and removed when
// the test ends.
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		missing(t, "Postgres is not installed", "installs it")
	}
	slices.Sort(bins)
	s := &PostgresServer{t: t, bin: filepath.Dir(bins[len(bins)-1])}
	// Postgres refuses to run as root: root runs it as the package's
	// postgres user, in a directory that user owns.
	dir, err := os.MkdirTemp("", "agentry-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal("running as root, and there is no postgres user to run Postgres as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		os.Chown(dir, uid, gid)
		s.run = []string{"runuser", "-u", "postgres", "--"}
	}
	s.dir = dir
	s.cmd("initdb", "-D", filepath.Join(dir, "data"), "-U", "agentry", "-A", "trust", "--no-sync", "-E", "UTF8")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	s.URL = fmt.Sprintf("postgres://agentry@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

func (s *PostgresServer) cmd(name string, args ...string) {
	s.t.Helper()
	argv := append(append(slices.Clone(s.run), filepath.Join(s.bin, name)), args...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

// Start starts the server and waits until it accepts connections.
func (s *PostgresServer) Start() {
	s.t.Helper()
	s.cmd("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-l", filepath.Join(s.dir, "log"), "-w", "-t", "60",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", s.port, s.dir), "start")
}

// Stop stops the server at once, without a checkpoint (as a crash would).
func (s *PostgresServer) Stop() {
	argv := append(append(slices.Clone(s.run), filepath.Join(s.bin, "pg_ctl")), "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	exec.Command(argv[0], argv[1:]...).Run() // stopped already is fine
}
