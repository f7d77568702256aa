package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// runTool runs one of the benchmark tools with a bound, its stderr shown
// live when the suite's stderr is a terminal (so loadgen's progress bar
// shows) and kept for the error message. It returns the tool's stdout and
// the CPU time (user and system) it used.
func runTool(ctx context.Context, timeout time.Duration, bin string, args ...string) ([]byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	if terminal {
		cmd.Stderr = io.MultiWriter(&errOut, os.Stderr)
	}
	err := cmd.Run()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		msg := strings.TrimSpace(errOut.String())
		if i := strings.LastIndexByte(msg, '\r'); i >= 0 { // progress bar
			msg = msg[i+1:]
		}
		if len(msg) > 1500 {
			msg = "..." + msg[len(msg)-1500:]
		}
		return out.Bytes(), cpu, fmt.Errorf("%s: %v: %s", filepath.Base(bin), err, msg)
	}
	return out.Bytes(), cpu, nil
}

// runJSON runs a tool and decodes the JSON it prints on stdout.
func runJSON(ctx context.Context, timeout time.Duration, v any, bin string, args ...string) error {
	out, _, err := runTool(ctx, timeout, bin, args...)
	if err != nil {
		return err
	}
	return json.Unmarshal(out, v)
}
