package zktest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// Paths of the Debian packages' files the server runs from. The DESIGN.md
// classpath: the package's config directory (for log4j.properties), the
// server jar and slf4j's simple binding (so the server logs to stderr).
const (
	ConfDir    = "/etc/zookeeper/conf"
	ServerJar  = "/usr/share/java/zookeeper.jar"
	SLF4JJar   = "/usr/share/java/slf4j-simple.jar"
	mainClass  = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
	installLck = "/tmp/strata-zktest-install.lock"
)

// debianPackages are installed when a file above is missing: zookeeper
// brings the server jar and a JRE; libslf4j-java holds slf4j-simple.jar.
var debianPackages = []string{"zookeeper", "libslf4j-java"}

var (
	installOnce sync.Once
	installErr  error
)

// EnsureInstalled checks that java, the ZooKeeper server jar and the slf4j
// binding are present and, if not, installs Debian's zookeeper package with
// apt-get (which needs root). It runs once per process; concurrent test
// binaries serialize on a lock file so only one of them runs apt-get.
func EnsureInstalled() error {
	installOnce.Do(func() { installErr = ensureInstalled() })
	return installErr
}

func ensureInstalled() error {
	if installed() {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("zktest: ZooKeeper is not installed (%s, %s, java) and this process is not root; run: apt-get install -y %s",
			ServerJar, SLF4JJar, strings.Join(debianPackages, " "))
	}
	lock, err := os.OpenFile(installLck, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("zktest: install lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("zktest: install lock: %w", err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if installed() { // another process installed it while we waited
		return nil
	}
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	install := func() ([]byte, error) {
		cmd := exec.Command("apt-get", append([]string{"install", "-y", "-qq", "--no-install-recommends"}, debianPackages...)...)
		cmd.Env = env
		return cmd.CombinedOutput()
	}
	if _, err := install(); err != nil {
		// The package lists may be missing or stale on a fresh machine.
		upd := exec.Command("apt-get", "update", "-qq")
		upd.Env = env
		if uout, uerr := upd.CombinedOutput(); uerr != nil {
			return fmt.Errorf("zktest: apt-get update: %w\n%s", uerr, uout)
		}
		if out, err := install(); err != nil {
			return fmt.Errorf("zktest: apt-get install %s: %w\n%s", strings.Join(debianPackages, " "), err, out)
		}
	}
	if !installed() {
		return errors.New("zktest: apt-get finished but the ZooKeeper jar, slf4j-simple.jar or java is still missing")
	}
	return nil
}

func installed() bool {
	for _, f := range []string{ServerJar, SLF4JJar} {
		if _, err := os.Stat(f); err != nil {
			return false
		}
	}
	_, err := exec.LookPath("java")
	return err == nil
}
