//go:build linux

package shell

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/tool"
)

// TestSandboxAttacked: a program the tool may run, used the way a
// hostile model would ask, cannot step outside the working directory: an
// allowed cat reads no file of the system (/etc/hostname), through a
// path or a symlink; an allowed cp writes nowhere else; an allowed curl
// reaches no server unless the spec allows the network. Inside, they
// work. Unconfined (the spec's "sandbox": false), the same cat reads the
// file: the test would see the difference.
func TestSandboxAttacked(t *testing.T) {
	testdb.Commands(t, "curl")
	if why := sandboxable(false); why != "" {
		t.Fatalf("this machine cannot confine: %s", why)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "reached") }))
	defer srv.Close()
	outside := filepath.Join(t.TempDir(), "outside.txt") // another directory of the same user
	os.WriteFile(outside, []byte("not yours"), 0o600)
	allow := []string{"cat", "cp", "curl", "ls"}
	tl, dir := newTool(t, Options{Allow: allow, AllowExec: []string{"curl"}, Timeout: 5 * time.Second})
	open, _ := newTool(t, Options{Allow: allow, AllowExec: []string{"curl"}, Timeout: 5 * time.Second, Network: true})
	loose, _ := newTool(t, Options{Allow: allow, AllowExec: []string{"curl"}, Timeout: 5 * time.Second, Unconfined: true})
	host, _ := os.ReadFile("/etc/hostname")
	for _, tc := range []struct {
		name, args string
		tool       string // confined, network, unconfined
		exit0      bool
		stdout     string // in stdout when it ran
	}{
		{"a file inside", `{"argv": ["cat", "f.txt"], "dir": "sub"}`, "confined", true, "inside"},
		{"a system file", `{"argv": ["cat", "/etc/hostname"]}`, "confined", false, ""},
		{"a system file by a symlink inside", `{"argv": ["cat", "etc-link/hostname"]}`, "confined", false, ""},
		{"another directory of the user", `{"argv": ["cat", "` + outside + `"]}`, "confined", false, ""},
		{"a listing of /etc", `{"argv": ["ls", "/etc"]}`, "confined", false, ""},
		{"a write outside", `{"argv": ["cp", "sub/f.txt", "` + filepath.Dir(outside) + `/copied.txt"]}`, "confined", false, ""},
		{"a write inside", `{"argv": ["cp", "sub/f.txt", "copied.txt"]}`, "confined", true, ""},
		{"the network", `{"argv": ["curl", "-s", "--max-time", "3", "` + srv.URL + `"]}`, "confined", false, ""},
		{"the network, allowed", `{"argv": ["curl", "-s", "--max-time", "3", "` + srv.URL + `"]}`, "network", true, "reached"},
		{"a system file, unconfined", `{"argv": ["cat", "/etc/hostname"]}`, "unconfined", true, strings.TrimSpace(string(host))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			use := map[string]tool.Tool{"confined": tl, "network": open, "unconfined": loose}[tc.tool]
			res, err := run1(use, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if (res.ExitCode == 0) != tc.exit0 || tc.stdout != "" && !strings.Contains(res.Stdout, tc.stdout) {
				t.Errorf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			if !tc.exit0 && strings.Contains(res.Stdout, strings.TrimSpace(string(host))) && len(host) > 0 {
				t.Errorf("the confined program read the host's name: %q", res.Stdout)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(outside), "copied.txt")); err == nil {
		t.Error("a confined cp wrote outside its directory")
	}
	if _, err := os.Stat(filepath.Join(dir, "copied.txt")); err != nil {
		t.Error("a confined cp could not write inside its directory")
	}
}

// TestConfineThread: the confinement itself, on a thread of this test
// (which dies with its goroutine, confined): the working directory is
// open, the system's programs readable, /etc and another directory not,
// no TCP connection leaves, and no signal reaches a process outside.
func TestConfineThread(t *testing.T) {
	if why := sandboxable(false); why != "" {
		t.Fatalf("this machine cannot confine: %s", why)
	}
	dir, other := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("in"), 0o600)
	os.WriteFile(filepath.Join(other, "out.txt"), []byte("out"), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	other2 := exec.Command("sleep", "30") // a process outside the sandbox, as agentry is
	if err := other2.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other2.Process.Kill(); other2.Wait() }()
	type check struct {
		name string
		err  error
	}
	got := make(chan []check, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the confined thread ends with this goroutine
		if err := confine(rules{Bin: "/bin/true", Dir: dir}); err != nil {
			got <- []check{{"confine", err}}
			return
		}
		read := func(p string) error { _, err := os.ReadFile(p); return err }
		conn := func() error {
			fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
			if err != nil {
				return err
			}
			defer syscall.Close(fd)
			addr := ln.Addr().(*net.TCPAddr)
			return syscall.Connect(fd, &syscall.SockaddrInet4{Port: addr.Port, Addr: [4]byte{127, 0, 0, 1}})
		}
		got <- []check{
			{"inside", read(filepath.Join(dir, "in.txt"))},
			{"a write inside", os.WriteFile(filepath.Join(dir, "new.txt"), []byte("x"), 0o600)},
			{"the system's programs", read("/bin/true")},
			{"/etc/hostname", read("/etc/hostname")},
			{"another directory", read(filepath.Join(other, "out.txt"))},
			{"a write elsewhere", os.WriteFile(filepath.Join(other, "new.txt"), []byte("x"), 0o600)},
			{"a TCP connection", conn()},
			{"a signal to a process outside", syscall.Kill(other2.Process.Pid, 0)},
		}
	}()
	want := map[string]bool{"inside": true, "a write inside": true, "the system's programs": true}
	for _, c := range <-got {
		if (c.err == nil) != want[c.name] {
			t.Errorf("%s: %v (allowed: %v)", c.name, c.err, want[c.name])
		}
	}
	if _, err := os.ReadFile(filepath.Join(other, "out.txt")); err != nil {
		t.Errorf("the rest of the process was confined too: %v", err)
	}
}
