package packaging_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The package on this machine, as an operator meets it: installed with
// dpkg, every file where it belongs with its owner and mode, the user and
// groups made, the config valid and the unit accepted by systemd; the
// unit's command run as the service user with the unit's environment (PID
// 1 is not systemd here) and driven through the socket by a member of the
// socket group, refused to anyone else; upgraded to a rebuilt package with
// the operator's config edits and the state store kept; removed and purged,
// with the state kept unless asked.
//
// It changes the machine (/usr/bin/lifecycled, the lifecycled user, ...),
// as a package install does, and puts it back after; it needs root and
// dpkg, and skips otherwise.
func TestThePackageInstallsUpgradesAndRemoves(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the install test needs root (it installs the package with dpkg)")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "make", "systemd-analyze"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the install test needs %s: %v", tool, err)
		}
	}
	if out, _ := exec.Command("dpkg-query", "-W", "-f", "${Status}", "lifecycled").Output(); strings.Contains(string(out), "installed") {
		t.Skipf("a lifecycled package is installed on this machine (%s): the test does not touch it", out)
	}
	m := newMachine(t)

	// Two builds of the package, the second a new version, as a release
	// would be: make package, as an operator runs it.
	dist := t.TempDir()
	v1, v2 := "0.3.0~test1", "0.3.0~test2"
	deb1, deb2 := m.makePackage(v1, filepath.Join(dist, "1")), m.makePackage(v2, filepath.Join(dist, "2"))
	lint := m.lintian(deb1)

	m.run("dpkg", "-i", deb1)
	m.checkInstalled(v1)
	m.run("/usr/bin/lifecycled", "config", "validate", "/etc/lifecycled/config.toml")
	m.run("systemd-analyze", "verify", "/usr/lib/systemd/system/lifecycled.service")

	// The unit's command, as the service user: an operator in the socket
	// group drives it; anyone else is refused.
	operator := m.addUser("lcd-test-operator", "lifecycled-admin")
	outsider := m.addUser("lcd-test-outsider")
	d := m.startUnit()
	status := m.cliAs(operator, 0, "status")
	if !strings.Contains(status, "ready") {
		t.Fatalf("status as a member of lifecycled-admin:\n%s", status)
	}
	refused := m.cliAs(outsider, 1, "status")
	if !strings.Contains(refused, "lifecycled-admin") {
		t.Errorf("a user outside the socket group is refused, and told which group to join:\n%s", refused)
	}
	tenant := "0b5e2c1a-7f3d-4e2b-9a61-3c8d5e7f9a10"
	m.cliAs(operator, 0, "tenant", "hold", tenant, "--reason", "install test: kept across the upgrade")
	d.stop()

	// The operator edits the config: a deleter through a bundled plugin,
	// which the daemon then starts from the packaged plugin directory.
	edited := m.read("/etc/lifecycled/config.toml") + `
[[deleter]]
name = "redis:sessions"
plugin = "redis"
[deleter.config]
addr = "127.0.0.1:6379"
patterns = ["lcd-install-test:{tenant}:*"]
`
	m.write("/etc/lifecycled/config.toml", edited)
	state := m.sum("/var/lib/lifecycled/lifecycled.db")

	m.run("dpkg", "-i", deb2)
	m.checkInstalled(v2)
	if got := m.read("/etc/lifecycled/config.toml"); got != edited {
		t.Fatalf("the upgrade replaced the operator's config:\n%s", got)
	}
	if got := m.sum("/var/lib/lifecycled/lifecycled.db"); got != state {
		t.Fatal("the upgrade changed the state store")
	}
	d = m.startUnit()
	status = m.cliAs(operator, 0, "status")
	if !strings.Contains(status, "redis:sessions") {
		t.Errorf("status names the deleter from the edited config:\n%s", status)
	}
	if holds := m.cliAs(operator, 0, "tenant", "holds"); !strings.Contains(holds, tenant) {
		t.Errorf("the hold made before the upgrade is still there:\n%s", holds)
	}
	d.stop()

	// Removed: the program goes, the config and the state stay. Purged:
	// the config goes, the state stays unless asked.
	m.run("dpkg", "-r", "lifecycled")
	for _, gone := range []string{"/usr/bin/lifecycled", "/usr/lib/lifecycled/plugins/lifecycled-plugin-redis",
		"/usr/lib/systemd/system/lifecycled.service", "/usr/lib/sysusers.d/lifecycled.conf"} {
		m.absent(gone)
	}
	if m.read("/etc/lifecycled/config.toml") != edited {
		t.Error("dpkg -r keeps the config")
	}
	m.present("/var/lib/lifecycled/lifecycled.db")
	m.run("dpkg", "-P", "lifecycled")
	m.absent("/etc/lifecycled/config.toml")
	m.present("/var/lib/lifecycled/lifecycled.db")
	if _, err := user.Lookup("lifecycled"); err != nil {
		t.Errorf("the service user stays (Debian policy): %v", err)
	}
	m.run("dpkg", "-i", deb2)
	m.runEnv([]string{"LIFECYCLED_PURGE_STATE=yes"}, "dpkg", "-P", "lifecycled")
	m.absent("/var/lib/lifecycled")

	if out, err := lint(); err != nil {
		t.Errorf("lintian reports errors on the package: %v\n%s", err, out)
	} else {
		t.Logf("lintian (no errors):\n%s", out)
	}
}

// machine is this machine, changed by the test and put back after.
type machine struct {
	t    *testing.T
	root string
	// Users and groups the test made (the package's too): deleted after.
	users, groups []string
}

func newMachine(t *testing.T) *machine {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	m := &machine{t: t, root: root}
	// What the package and the test create, if they did not exist before.
	if _, err := user.Lookup("lifecycled"); err != nil {
		m.users = append(m.users, "lifecycled")
	}
	for _, g := range []string{"lifecycled", "lifecycled-admin"} {
		if _, err := user.LookupGroup(g); err != nil {
			m.groups = append(m.groups, g)
		}
	}
	t.Cleanup(m.restore)
	return m
}

// restore removes the package and what it left, and the users and groups
// the test made.
func (m *machine) restore() {
	cmd := exec.Command("dpkg", "--purge", "--force-all", "lifecycled")
	cmd.Env = append(os.Environ(), "LIFECYCLED_PURGE_STATE=yes")
	if out, err := cmd.CombinedOutput(); err != nil {
		m.t.Logf("clean up: dpkg --purge: %v\n%s", err, out)
	}
	for _, dir := range []string{"/etc/lifecycled", "/var/lib/lifecycled", "/run/lifecycled", "/var/log/lifecycled"} {
		os.RemoveAll(dir)
	}
	for _, u := range m.users {
		exec.Command("userdel", u).Run()
	}
	for _, g := range m.groups {
		exec.Command("groupdel", g).Run()
	}
}

func (m *machine) runEnv(env []string, name string, args ...string) string {
	m.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		m.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (m *machine) run(name string, args ...string) string {
	m.t.Helper()
	return m.runEnv(nil, name, args...)
}

func (m *machine) makePackage(version, dist string) string {
	m.t.Helper()
	m.run("make", "-C", m.root, "--no-print-directory", "package", "VERSION="+version, "DIST="+dist)
	deb := filepath.Join(dist, "lifecycled_"+version+"_amd64.deb")
	m.present(deb)
	return deb
}

// lintian checks the package while the rest goes on (it takes a minute);
// the function it returns waits for its verdict.
func (m *machine) lintian(deb string) func() (string, error) {
	var once sync.WaitGroup
	var out []byte
	var err error
	once.Add(1)
	go func() {
		defer once.Done()
		if _, lerr := exec.LookPath("lintian"); lerr != nil {
			out, err = nil, fmt.Errorf("lintian is not installed (make test-deps installs it): %w", lerr)
			return
		}
		out, err = exec.Command("lintian", "--fail-on", "error", "--tag-display-limit", "0", deb).CombinedOutput()
	}()
	return func() (string, error) {
		once.Wait()
		return string(out), err
	}
}

type fileWant struct {
	path         string
	mode         os.FileMode
	owner, group string
}

// checkInstalled checks every file of the package and what its scripts
// made, with owners and modes, and the version the program reports.
func (m *machine) checkInstalled(version string) {
	m.t.Helper()
	want := []fileWant{
		{"/usr/bin/lifecycled", 0o755, "root", "root"},
		{"/usr/lib/lifecycled/plugins", os.ModeDir | 0o755, "root", "root"},
		{"/usr/lib/systemd/system/lifecycled.service", 0o644, "root", "root"},
		{"/usr/lib/sysusers.d/lifecycled.conf", 0o644, "root", "root"},
		{"/usr/lib/tmpfiles.d/lifecycled.conf", 0o644, "root", "root"},
		{"/etc/lifecycled/config.toml", 0o640, "root", "lifecycled"},
		{"/var/lib/lifecycled", os.ModeDir | 0o750, "lifecycled", "lifecycled"},
		{"/run/lifecycled", os.ModeDir | 0o755, "lifecycled", "lifecycled"},
		{"/usr/share/doc/lifecycled/copyright", 0o644, "root", "root"},
		{"/usr/share/doc/lifecycled/changelog.gz", 0o644, "root", "root"},
		{"/usr/share/doc/lifecycled/README.md", 0o644, "root", "root"},
	}
	for _, p := range []string{"postgres", "mysql", "dynamodb", "redis", "kafka", "rabbitmq", "pgtable"} {
		want = append(want, fileWant{"/usr/lib/lifecycled/plugins/lifecycled-plugin-" + p, 0o755, "root", "root"})
	}
	for _, w := range want {
		fi, err := os.Stat(w.path)
		if err != nil {
			m.t.Errorf("%s: %v", w.path, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		owner, group := nameOf(user.LookupId, st.Uid), nameOf(func(id string) (*user.User, error) {
			g, err := user.LookupGroupId(id)
			if err != nil {
				return nil, err
			}
			return &user.User{Username: g.Name}, nil
		}, st.Gid)
		if fi.Mode()&(os.ModeDir|os.ModePerm) != w.mode || owner != w.owner || group != w.group {
			m.t.Errorf("%s: %v %s:%s, want %v %s:%s", w.path, fi.Mode(), owner, group, w.mode, w.owner, w.group)
		}
	}
	unit, err := os.ReadFile(filepath.Join(m.root, "deploy/systemd/lifecycled.service"))
	if err != nil {
		m.t.Fatal(err)
	}
	if m.read("/usr/lib/systemd/system/lifecycled.service") != string(unit) {
		m.t.Error("the installed unit is not deploy/systemd/lifecycled.service")
	}
	u, err := user.Lookup("lifecycled")
	if err != nil {
		m.t.Fatalf("the service user: %v", err)
	}
	if u.HomeDir != "/var/lib/lifecycled" {
		m.t.Errorf("the service user's home is %s", u.HomeDir)
	}
	if _, err := user.LookupGroup("lifecycled-admin"); err != nil {
		m.t.Errorf("the socket group: %v", err)
	}
	if got := strings.TrimSpace(m.run("/usr/bin/lifecycled", "version")); !strings.Contains(got, version) {
		m.t.Errorf("lifecycled version says %q, want %s", got, version)
	}
}

func nameOf(lookup func(string) (*user.User, error), id uint32) string {
	u, err := lookup(strconv.FormatUint(uint64(id), 10))
	if err != nil {
		return strconv.FormatUint(uint64(id), 10)
	}
	return u.Username
}

func (m *machine) read(path string) string {
	m.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		m.t.Fatal(err)
	}
	return string(b)
}

func (m *machine) write(path, content string) {
	m.t.Helper()
	// In place, as an editor saves it: owner and mode stay.
	if err := os.WriteFile(path, []byte(content), 0); err != nil {
		m.t.Fatal(err)
	}
}

func (m *machine) sum(path string) string {
	m.t.Helper()
	h := sha256.Sum256([]byte(m.read(path)))
	return hex.EncodeToString(h[:])
}

func (m *machine) present(path string) {
	m.t.Helper()
	if _, err := os.Stat(path); err != nil {
		m.t.Fatalf("%s should be there: %v", path, err)
	}
}

func (m *machine) absent(path string) {
	m.t.Helper()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		m.t.Errorf("%s should be gone (%v)", path, err)
	}
}

// addUser makes a system user for the test, in groups.
func (m *machine) addUser(name string, groups ...string) *user.User {
	m.t.Helper()
	if _, err := user.Lookup(name); err != nil {
		args := []string{"--system", "--no-create-home", "--shell", "/usr/sbin/nologin"}
		if len(groups) > 0 {
			args = append(args, "--groups", strings.Join(groups, ","))
		}
		m.run("useradd", append(args, name)...)
		m.users = append([]string{name}, m.users...)
		m.groups = append(m.groups, name) // useradd made its group
	}
	u, err := user.Lookup(name)
	if err != nil {
		m.t.Fatal(err)
	}
	return u
}

// credential is how u runs a command: its uid, its primary group and its
// other groups, as a login would give them.
func (m *machine) credential(u *user.User) *syscall.Credential {
	m.t.Helper()
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	ids, err := u.GroupIds()
	if err != nil {
		m.t.Fatal(err)
	}
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	for _, id := range ids {
		g, _ := strconv.ParseUint(id, 10, 32)
		c.Groups = append(c.Groups, uint32(g))
	}
	return c
}

// cliAs runs the installed CLI as u, against the packaged socket (the
// CLI's default), and wants exit status code.
func (m *machine) cliAs(u *user.User, code int, args ...string) string {
	m.t.Helper()
	cmd := exec.Command("/usr/bin/lifecycled", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.credential(u)}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	out, err := cmd.CombinedOutput()
	got := 0
	if ee, ok := err.(*exec.ExitError); ok {
		got = ee.ExitCode()
	} else if err != nil {
		m.t.Fatalf("lifecycled %s as %s: %v", strings.Join(args, " "), u.Username, err)
	}
	if got != code {
		m.t.Fatalf("lifecycled %s as %s: exit %d, want %d\n%s", strings.Join(args, " "), u.Username, got, code, out)
	}
	return string(out)
}

// unit is the [Service] section of the installed unit: key, then values.
func (m *machine) unit() map[string][]string {
	m.t.Helper()
	f, err := os.Open("/usr/lib/systemd/system/lifecycled.service")
	if err != nil {
		m.t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			out[k] = append(out[k], v)
		}
	}
	return out
}

type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	// exited is closed when the process has been waited for (waitErr).
	exited  chan struct{}
	waitErr error
}

// startUnit does what systemd does to start the unit, as far as the
// daemon can tell: the runtime, state and logs directories made for the
// service user, its user, group and supplementary groups, working
// directory, umask and environment, then ExecStart. It waits for the
// admin socket.
func (m *machine) startUnit() *daemon {
	m.t.Helper()
	u := m.unit()
	one := func(k string) string {
		if len(u[k]) != 1 {
			m.t.Fatalf("the unit has %d %s=", len(u[k]), k)
		}
		return u[k][0]
	}
	svc, err := user.Lookup(one("User"))
	if err != nil {
		m.t.Fatal(err)
	}
	grp, err := user.LookupGroup(one("Group"))
	if err != nil {
		m.t.Fatal(err)
	}
	uid, _ := strconv.Atoi(svc.Uid)
	gid, _ := strconv.Atoi(grp.Gid)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	for _, name := range strings.Fields(one("SupplementaryGroups")) {
		g, err := user.LookupGroup(name)
		if err != nil {
			m.t.Fatalf("SupplementaryGroups=%s: %v", name, err)
		}
		id, _ := strconv.Atoi(g.Gid)
		cred.Groups = append(cred.Groups, uint32(id))
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + svc.HomeDir,
		"USER=" + svc.Username, "LOGNAME=" + svc.Username, "INVOCATION_ID=lcd-install-test"}
	for _, kind := range []struct{ key, base, env string }{
		{"RuntimeDirectory", "/run", "RUNTIME_DIRECTORY"}, {"StateDirectory", "/var/lib", "STATE_DIRECTORY"},
		{"LogsDirectory", "/var/log", "LOGS_DIRECTORY"}} {
		dir := filepath.Join(kind.base, one(kind.key))
		mode := os.FileMode(0o755)
		if ms, ok := u[kind.key+"Mode"]; ok {
			v, err := strconv.ParseUint(ms[0], 8, 32)
			if err != nil {
				m.t.Fatal(err)
			}
			mode = os.FileMode(v)
		}
		if err := os.MkdirAll(dir, mode); err != nil {
			m.t.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			m.t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			m.t.Fatal(err)
		}
		env = append(env, kind.env+"="+dir)
	}
	for _, e := range u["Environment"] {
		env = append(env, strings.Fields(e)...)
	}
	argv := strings.Fields(one("ExecStart"))
	// The umask, as systemd sets it before exec.
	cmd := exec.Command("/bin/sh", append([]string{"-c", `umask "$0"; exec "$@"`, one("UMask")}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	cmd.Dir = one("WorkingDirectory")
	cmd.Env = env
	d := &daemon{t: m.t, cmd: cmd, stderr: &bytes.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = io.Discard, d.stderr
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("ExecStart=%s: %v", one("ExecStart"), err)
	}
	go func() { d.waitErr = cmd.Wait(); close(d.exited) }()
	m.t.Cleanup(d.stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		if fi, err := os.Stat("/run/lifecycled/admin.sock"); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return d
		}
		select {
		case <-d.exited:
			m.t.Fatalf("the daemon exited before its socket was there: %v\n%s", d.waitErr, d.stderr)
		case <-ctx.Done():
			m.t.Fatalf("no admin socket after a minute\n%s", d.stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM, as systemctl stop does (KillMode=mixed: to the main
// process), and waits for a clean exit; once stopped, it does nothing.
func (d *daemon) stop() {
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		if d.waitErr != nil {
			d.t.Errorf("the daemon did not stop cleanly on SIGTERM: %v\n%s", d.waitErr, d.stderr)
		}
	case <-time.After(45 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
		d.t.Errorf("the daemon did not stop within TimeoutStopSec (45 s)\n%s", d.stderr)
	}
}
