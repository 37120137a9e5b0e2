package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes cmd's process killed when the test binary dies (a
// panic, a timeout): no server outlives its test.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
