package miniotest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Module is the MinIO server the harness runs, built from the Go module
// proxy (DESIGN.md, "Real components in tests").
const Module = "github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c"

// BuildTimeout bounds a build of MinIO (about 3 minutes on 2 cores).
const BuildTimeout = 15 * time.Minute

// installLock serializes builds among test binaries running at once.
const installLock = "/tmp/strata-miniotest-install.lock"

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// Binary returns the path of the minio binary: $STRATA_MINIO if set, else
// minio in $(go env GOBIN) or $(go env GOPATH)/bin, else minio on PATH;
// when there is none it runs `go install` of Module once (bounded by
// BuildTimeout; concurrent test binaries wait for one build). The binary
// stays in GOPATH/bin, so later runs find it at once.
func Binary() (string, error) {
	binaryOnce.Do(func() { binaryPath, binaryErr = findOrBuild() })
	return binaryPath, binaryErr
}

func findOrBuild() (string, error) {
	if p := os.Getenv("STRATA_MINIO"); p != "" {
		if !executable(p) {
			return "", fmt.Errorf("miniotest: STRATA_MINIO=%s is not an executable file", p)
		}
		return p, nil
	}
	gobin, err := goBin()
	if err != nil {
		return "", err
	}
	want := filepath.Join(gobin, "minio")
	if executable(want) {
		return want, nil
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}

	lock, err := os.OpenFile(installLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("miniotest: install lock: %w", err)
	}
	defer lock.Close() // releases the flock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("miniotest: install lock: %w", err)
	}
	if executable(want) { // built by another process while we waited
		return want, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", Module)
	cmd.Dir = os.TempDir() // outside any module, so go.mod plays no part
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return "", fmt.Errorf("miniotest: go install %s did not finish within %v", Module, BuildTimeout)
	}
	if err != nil {
		return "", fmt.Errorf("miniotest: go install %s: %w\n%s", Module, err, tail(out, 40))
	}
	if !executable(want) {
		return "", errors.New("miniotest: go install finished but " + want + " is missing")
	}
	return want, nil
}

// goBin is where go install puts binaries.
func goBin() (string, error) {
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return "", fmt.Errorf("miniotest: go env: %w", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) >= 1 && lines[0] != "" {
		return lines[0], nil
	}
	if len(lines) >= 2 && lines[1] != "" {
		return filepath.Join(strings.Split(lines[1], string(os.PathListSeparator))[0], "bin"), nil
	}
	return "", errors.New("miniotest: go env reports neither GOBIN nor GOPATH")
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
