package store

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A holder whose process exited and was not reaped yet (a zombie: its
// parent, often a container's init, collects it late or never) is dead:
// its runs resume at once, without waiting out their leases.
func TestZombieHolderDead(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait() // reaped only at the end: until then, a zombie
	holder := strings.Split(NewHolder(), "/")
	holder[2], holder[3] = strconv.Itoa(cmd.Process.Pid), "x"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		stat, _ := os.ReadFile("/proc/" + holder[2] + "/stat")
		if strings.Contains(string(stat), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child never exited: %s", stat)
		}
	}
	if !HolderDead(strings.Join(holder, "/")) {
		t.Errorf("the holder of an exited, unreaped process is alive")
	}
}
