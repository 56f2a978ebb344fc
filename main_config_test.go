package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runBinary runs celld with args and env added to the test's environment,
// and returns its exit code, stdout and stderr. It is for invocations that
// exit on their own (bad configuration, --help, --healthcheck).
func runBinary(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(celldBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("celld %q did not exit; stderr:\n%s", args, errb.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestProcessRefusesBadConfig: the silently ignored settings now
// stop celld with exit 2 and one line naming the flag, the variable and
// the value, before it creates the data directory.
func TestProcessRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		args []string
		want []string
	}{
		{[]string{"CELLD_PERSIST=maybe"}, nil, []string{"CELLD_PERSIST", "--persist", `"maybe"`}},
		{[]string{"CELLD_MAXCLIENTS=abc"}, nil, []string{"CELLD_MAXCLIENTS", "--maxclients", `"abc"`}},
		{[]string{"CELLD_TLS_PORT=abc"}, nil, []string{"CELLD_TLS_PORT", "--tls-port", `"abc"`}},
		{[]string{"CELLD_PROTO_MAX_BULK_LEN=1q"}, nil, []string{"CELLD_PROTO_MAX_BULK_LEN", `"1q"`}},
		{nil, []string{"--log-format", "yaml"}, []string{"--log-format", "CELLD_LOG_FORMAT", `"yaml"`}},
		{nil, []string{"--maxclients", "-5"}, []string{"--maxclients", "CELLD_MAXCLIENTS", `"-5"`}},
		{nil, []string{"--proto-max-bulk-len", "0"}, []string{"--proto-max-bulk-len", `"0"`}},
		{nil, []string{"--protected-mode", "maybe"}, []string{"--protected-mode", `"maybe"`}},
		{nil, []string{"--persist", "false", "serve"}, []string{`unexpected argument "serve"`}},
		{nil, []string{"--cluster-nodes", "x"}, []string{"--cluster-nodes"}},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		args := append([]string{"--addr", freeAddr(t), "--dir", dir}, tc.args...)
		code, stdout, stderr := runBinary(t, tc.env, args...)
		if code != 2 {
			t.Errorf("%v %q: exit %d, want 2; stderr:\n%s", tc.env, tc.args, code, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if len(lines) != 1 || stdout != "" {
			t.Errorf("%v %q: want one line on stderr, got:\n%s%s", tc.env, tc.args, stdout, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v %q: %q does not say %s", tc.env, tc.args, stderr, w)
			}
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%v %q: the data directory was created (%v)", tc.env, tc.args, err)
		}
	}
}

// TestProcessPortInUseBeforeRestore: a port already taken stops start-up
// before the data directory is touched.
func TestProcessPortInUseBeforeRestore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := filepath.Join(t.TempDir(), "data")
	code, _, stderr := runBinary(t, nil, "--addr", ln.Addr().String(), "--dir", dir)
	if code == 0 || !strings.Contains(stderr, "address already in use") {
		t.Fatalf("exit %d on a taken port; stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data directory was created before the port was bound (%v)", err)
	}
}

// TestProcessHelp: --help and `celld help` print the grouped help on
// stdout and exit 0; --version prints the version.
func TestProcessHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}} {
		code, stdout, stderr := runBinary(t, nil, args...)
		if code != 0 || !strings.Contains(stdout, "rate limiter") || !strings.Contains(stdout, "\nObservability:\n") {
			t.Errorf("%q: exit %d\nstdout:\n%.300s\nstderr:\n%s", args, code, stdout, stderr)
		}
	}
	if code, stdout, _ := runBinary(t, nil, "--version"); code != 0 || stdout != "celld "+version+"\n" {
		t.Errorf("--version: %d %q", code, stdout)
	}
}

// TestHealthcheckTLSOnly: --healthcheck PINGs over TLS when no plain port
// is served (--addr with port 0, or ”), with and without client
// certificates, and fails on a port nothing answers.
func TestHealthcheckTLSOnly(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := writeTestCert(t, dir)
	for _, mtls := range []bool{false, true} {
		a := defaultAccess(t)
		a.TLSCert, a.TLSKey = certFile, keyFile
		if mtls {
			a.TLSCA = caFile
		}
		_, port, _ := net.SplitHostPort(freeAddr(t))
		a.TLSPort = atoi(t, port)
		lns := serveAccess(t, a, "127.0.0.1:0", io.Discard)
		if len(lns) != 1 || !lns[0].tls {
			t.Fatalf("TLS only: listeners %+v", lns)
		}
		if err := ping(a, 5*time.Second); err != nil {
			t.Errorf("mTLS %v: ping over TLS: %v", mtls, err)
		}
		// The binary, without --tls-ca: it presents no client
		// certificate, so with mTLS the server's refusal (a TLS alert)
		// is the answer that shows it is up.
		code, _, stderr := runBinary(t, nil, "--healthcheck", "--addr", "127.0.0.1:0", "--tls-port", port,
			"--tls-cert", certFile, "--tls-key", keyFile)
		if code != 0 || mtls != strings.Contains(stderr, "TLS alert") {
			t.Errorf("mTLS %v: celld --healthcheck over TLS: exit %d\n%s", mtls, code, stderr)
		}
	}
	code, _, _ := runBinary(t, nil, "--healthcheck", "--addr", freeAddr(t))
	if code != 1 {
		t.Errorf("--healthcheck with nothing listening: exit %d, want 1", code)
	}
}

// TestMoveAside: --recover=skip's move keeps the directory itself, moves
// every entry into unreadable-<time>, and leaves earlier such directories
// where they are.
func TestMoveAside(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "LOCK"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "000001.sst"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	now := time.Unix(1_700_000_000, 0)
	aside, err := moveAside(dir, now)
	if err != nil || aside != filepath.Join(dir, "unreadable-1700000000") {
		t.Fatalf("moveAside: %s, %v", aside, err)
	}
	names := func(d string) []string {
		ents, _ := os.ReadDir(d)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	if got := strings.Join(names(aside), ","); got != "000001.sst,LOCK,sub" {
		t.Fatalf("moved: %s", got)
	}
	os.WriteFile(filepath.Join(dir, "MANIFEST"), nil, 0o644)
	aside2, err := moveAside(dir, now) // a second skip in the same second
	if err != nil || aside2 != aside+"-1" {
		t.Fatalf("second moveAside: %s, %v", aside2, err)
	}
	if got := strings.Join(names(dir), ","); got != "unreadable-1700000000,unreadable-1700000000-1" {
		t.Fatalf("left in the directory: %s", got)
	}
	if got := strings.Join(names(aside2), ","); got != "MANIFEST" {
		t.Fatalf("second move: %s", got)
	}
}

// TestProcessTLSOnlyAllInterfaces: --addr 0.0.0.0:0 with --tls-port serves
// TLS on every interface and no plain port, and --healthcheck with the same
// settings answers over TLS.
func TestProcessTLSOnlyAllInterfaces(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := writeTestCert(t, dir)
	_, port, _ := net.SplitHostPort(freeAddr(t))
	c := mustLaunch(t, t.TempDir(), "--persist=no", "--addr", "0.0.0.0:0", "--tls-port", port,
		"--tls-cert", certFile, "--tls-key", keyFile)
	log := c.logs.String()
	listening := firstLine(log, "celld listening")
	if !strings.Contains(listening, "addr=0.0.0.0:"+port) && !strings.Contains(listening, "addr=[::]:"+port) {
		t.Fatalf("TLS-only listener is not on all interfaces: %s", listening)
	}
	if n := strings.Count(log, "celld listening"); n != 1 {
		t.Errorf("%d listeners, want only the TLS one:\n%s", n, log)
	}
	if conn, err := net.Dial("tcp", c.addr); err == nil {
		conn.Close()
		t.Errorf("the plain port %s answers in TLS-only mode", c.addr)
	}
	code, _, stderr := runBinary(t, nil, "--healthcheck", "--addr", "0.0.0.0:0", "--tls-port", port,
		"--tls-cert", certFile, "--tls-key", keyFile)
	if code != 0 {
		t.Errorf("--healthcheck against TLS on all interfaces: exit %d\n%s", code, stderr)
	}
	c.termOK()
}
