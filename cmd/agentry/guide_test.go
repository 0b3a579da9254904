package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentry/agentry"
	"github.com/agentry/agentry/internal/testdb"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// TestGuide follows docs/guide.md as its reader would, in an empty
// directory and one shell: every file it shows is written, every command
// run in order, each command's exit status checked (0 unless the block
// says exit=N), and each output it shows found in what the command
// printed ("…" stands for what differs from run to run). Its go get
// takes this checkout as agentry's current version, from a module proxy
// in a directory; its ports are free ones.
func TestGuide(t *testing.T) {
	testdb.Commands(t, "bash", "curl", "jq", "pkill")
	md, err := os.ReadFile("../../docs/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	ports := strings.NewReplacer("127.0.0.1:8088", "127.0.0.1:"+freePort(t), "127.0.0.1:8080", "127.0.0.1:"+freePort(t))
	blocks, err := parseGuide(ports.Replace(string(md)))
	if err != nil {
		t.Fatal(err)
	}
	sh := newGuideShell(t, guideEnv(t))
	var last *guideBlock // the last command block run: the one an output block shows
	for i := range blocks {
		b := &blocks[i]
		switch {
		case b.file != "":
			path := filepath.Join(sh.cwd(t), b.file)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(b.body), 0o644); err != nil {
				t.Fatal(err)
			}
		case b.lang == "sh":
			if b.wait != "" {
				sh.waitFor(t, b.wait)
			}
			b.out = sh.run(t, b)
			last = b
		case b.lang == "text":
			if last == nil {
				t.Fatalf("guide line %d: output shown before any command", b.line)
			}
			for _, want := range strings.Split(b.body, "\n") {
				if want = strings.TrimSpace(want); want != "" && !shows(last.out, want) {
					t.Errorf("guide line %d: the output of line %d lacks %q:\n%s", b.line, last.line, want, last.out)
				}
			}
		}
	}
}

// guideBlock is a fenced block of the guide: a file to write (file=), a
// shell command (sh: exit=N, background, wait="TEXT" before it), or the
// output the command before it prints (text).
type guideBlock struct {
	lang, file, body, wait string
	line, exit             int
	background             bool
	out                    string // what a command printed
}

var fence = regexp.MustCompile("(?m)^```([^\n]*)\n")

// parseGuide finds the fenced blocks of md, with their info strings.
func parseGuide(md string) ([]guideBlock, error) {
	var blocks []guideBlock
	for rest, at := md, 0; ; {
		loc := fence.FindStringSubmatchIndex(rest)
		if loc == nil {
			return blocks, nil
		}
		end := strings.Index(rest[loc[1]:], "\n```")
		if end < 0 {
			return nil, fmt.Errorf("line %d: a block without its end", strings.Count(md[:at+loc[0]], "\n")+1)
		}
		b := guideBlock{body: rest[loc[1] : loc[1]+end+1], line: strings.Count(md[:at+loc[0]], "\n") + 1}
		info := rest[loc[2]:loc[3]]
		b.lang, info, _ = strings.Cut(info, " ")
		for info = strings.TrimSpace(info); info != ""; info = strings.TrimSpace(info) {
			var kv string
			if i := strings.Index(info, `"`); i >= 0 && !strings.Contains(info[:i], " ") {
				j := strings.Index(info[i+1:], `"`)
				if j < 0 {
					return nil, fmt.Errorf("line %d: an unclosed quote", b.line)
				}
				kv, info = strings.ReplaceAll(info[:i+1+j+1], `"`, ""), info[i+1+j+1:]
			} else {
				kv, info, _ = strings.Cut(info, " ")
			}
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "file":
				b.file = v
			case "wait":
				b.wait = v
			case "background":
				b.background = true
			case "exit":
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, fmt.Errorf("line %d: exit=%q", b.line, v)
				}
				b.exit = n
			default:
				return nil, fmt.Errorf("line %d: %q is not a block attribute", b.line, k)
			}
		}
		blocks = append(blocks, b)
		next := loc[1] + end + len("\n```")
		at, rest = at+next, rest[next:]
	}
}

// shows reports whether out has a line holding want's parts (split at
// "…") in order.
func shows(out, want string) bool {
	parts := strings.Split(want, "…")
	for _, line := range strings.Split(out, "\n") {
		rest, ok := line, true
		for _, p := range parts {
			i := strings.Index(rest, strings.TrimSpace(p))
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(strings.TrimSpace(p)):]
		}
		if ok {
			return true
		}
	}
	return false
}

// guideEnv is the reader's environment: agentry on PATH, a home of its
// own, and Go's module downloads from a proxy in a directory that has
// this checkout as agentry's current version, and every other module
// from the machine's module cache.
func guideEnv(t *testing.T) []string {
	home := t.TempDir()
	goenv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	proxy := moduleProxy(t, "v"+agentry.Version)
	env := []string{
		"PATH=" + filepath.Dir(binary(t)) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"GOCACHE=" + goenv("GOCACHE"), "GOMODCACHE=" + filepath.Join(home, "mod"), "GOTOOLCHAIN=local",
		"GOFLAGS=-modcacherw " + goenv("GOFLAGS"), // a module cache t.TempDir can remove
		// This checkout, then what the machine downloaded already, then
		// (a module its builds did not need) the machine's own proxy.
		"GOPROXY=file://" + proxy + ",file://" + filepath.Join(goenv("GOMODCACHE"), "cache", "download") + "," + goenv("GOPROXY"),
		"GOSUMDB=off", // the checkout's zip is not the sum database's
		"LANG=C.UTF-8", "TERM=dumb",
	}
	if dir := os.Getenv("GOCOVERDIR"); dir != "" {
		env = append(env, "GOCOVERDIR="+dir) // the binary's coverage, as in every other test
	}
	return env
}

// freePort is a free loopback port.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// guideShell is one bash the guide's commands run in, in order: a cd or
// a variable of one command holds for the next.
type guideShell struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	rcs chan int
	dir string // the shell's files: outputs, background logs
	n   int
	bgs []string // the background commands' logs
}

func newGuideShell(t *testing.T, env []string) *guideShell {
	sh := &guideShell{rcs: make(chan int, 64), dir: t.TempDir()} // buffered: a failed test reads no more
	sh.cmd = exec.Command("bash", "--norc", "--noprofile")
	sh.cmd.Dir, sh.cmd.Env = t.TempDir(), env
	sh.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its background commands die with it
	sh.in, _ = sh.cmd.StdinPipe()
	out, _ := sh.cmd.StdoutPipe()
	sh.cmd.Stderr = sh.cmd.Stdout
	if err := sh.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "::rc::"); ok {
				n, _ := strconv.Atoi(v)
				sh.rcs <- n
			}
		}
		close(sh.rcs)
	}()
	t.Cleanup(func() {
		syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
		sh.cmd.Wait()
	})
	return sh
}

// exec runs line in the shell, its output to file, and returns its exit
// status.
func (sh *guideShell) exec(t *testing.T, line, file string, background bool) int {
	t.Helper()
	cmd := fmt.Sprintf("{ %s\n} >>%q 2>&1 </dev/null; echo \"::rc::$?\"\n", line, file)
	if background {
		cmd = fmt.Sprintf("{ %s\n} >>%q 2>&1 </dev/null &\necho \"::rc::0\"\n", line, file)
	}
	if _, err := io.WriteString(sh.in, cmd); err != nil {
		t.Fatal(err)
	}
	select {
	case rc, ok := <-sh.rcs:
		if !ok {
			t.Fatalf("the shell exited at %q", line)
		}
		return rc
	case <-time.After(10 * time.Minute):
		t.Fatalf("%q did not end in 10 minutes", line)
	}
	return 0
}

// run runs a command block, line by line: each line must exit 0 but the
// last, which exits b.exit; it returns what the block printed.
func (sh *guideShell) run(t *testing.T, b *guideBlock) string {
	t.Helper()
	sh.n++
	file := filepath.Join(sh.dir, fmt.Sprintf("block-%d.out", sh.n))
	if b.background {
		sh.bgs = append(sh.bgs, file)
	}
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(b.body, "\\\n", "")), "\n")
	if b.background && len(lines) > 1 {
		t.Fatalf("guide line %d: a background block is one command (its lines would run at once)", b.line)
	}
	for i, line := range lines {
		want := 0
		if i == len(lines)-1 {
			want = b.exit
		}
		if rc := sh.exec(t, line, file, b.background); rc != want {
			out, _ := os.ReadFile(file)
			t.Fatalf("guide line %d: %q exited %d, want %d:\n%s", b.line, line, rc, want, out)
		}
	}
	out, _ := os.ReadFile(file)
	return string(out)
}

// waitFor waits until a background command has printed text.
func (sh *guideShell) waitFor(t *testing.T, text string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var all strings.Builder
		for _, f := range sh.bgs {
			b, _ := os.ReadFile(f)
			all.Write(b)
			if strings.Contains(string(b), text) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no background command printed %q:\n%s", text, all.String())
		}
	}
}

// cwd is the shell's working directory, where a file block is written.
func (sh *guideShell) cwd(t *testing.T) string {
	t.Helper()
	file := filepath.Join(sh.dir, "pwd")
	os.Remove(file)
	if rc := sh.exec(t, "pwd", file, false); rc != 0 {
		t.Fatalf("pwd: %d", rc)
	}
	out, _ := os.ReadFile(file)
	return strings.TrimSpace(string(out))
}

// moduleProxy writes a module proxy in a directory (GOPROXY=file://…)
// that serves this checkout as github.com/agentry/agentry at version:
// its files git tracks or would (the ignored ones, built binaries, left
// out), as they are in the working tree.
func moduleProxy(t *testing.T, version string) string {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = root
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []modzip.File
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if _, err := os.Lstat(filepath.Join(root, name)); err == nil { // not deleted since
			files = append(files, checkoutFile{root, name})
		}
	}
	dir := t.TempDir()
	at := filepath.Join(dir, "github.com", "agentry", "agentry", "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	z, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if err := modzip.Create(z, module.Version{Path: "github.com/agentry/agentry", Version: version}, files); err != nil {
		t.Fatalf("the module's zip: %v", err)
	}
	for name, body := range map[string]string{
		"list":            version + "\n",
		version + ".info": fmt.Sprintf(`{"Version": %q, "Time": "2026-11-29T00:00:00Z"}`, version),
		version + ".mod":  string(mod),
	} {
		if err := os.WriteFile(filepath.Join(at, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkoutFile is a file of the checkout, for its module zip.
type checkoutFile struct{ root, name string }

func (f checkoutFile) Path() string                 { return f.name }
func (f checkoutFile) Lstat() (os.FileInfo, error)  { return os.Lstat(filepath.Join(f.root, f.name)) }
func (f checkoutFile) Open() (io.ReadCloser, error) { return os.Open(filepath.Join(f.root, f.name)) }
