package main

import (
	"os"
	"strings"
	"testing"
)

// An events file that cannot be written (a full disk; /dev/full here) must
// not throw away analyze's or digest's result: the profile is printed and
// the run still exits 1 saying why, as watch does.
func TestOfflineEventsWriteFailureKeepsResult(t *testing.T) {
	runs := map[string]func() (string, error){
		"analyze": func() (string, error) {
			return runAnalyzeCmd(t, "--events", "/dev/full", "../../testdata/captures/errors.pcap.gz")
		},
		"digest": func() (string, error) {
			return runDigestCmd(t, nil, "--events", "/dev/full", slowlogDir+"/mysql-5.7.log")
		},
	}
	for name, run := range runs {
		out, err := run()
		if exitCode(err) != exitFailure || !strings.Contains(err.Error(), "/dev/full") {
			t.Errorf("%s: exit %d (%v), want %d naming the events file", name, exitCode(err), err, exitFailure)
		}
		if !strings.Contains(out, "# profile") {
			t.Errorf("%s: no profile printed:\n%s", name, out)
		}
	}
}

// digestStdin runs digest with args on standard input holding data ("-"
// reads the process's stdin, not cobra's: it is swapped for a file).
func digestStdin(t *testing.T, data []byte, args ...string) (string, error) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	f.Write(data)
	f.Seek(0, 0)
	old := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = old; f.Close() }()
	return runDigestCmd(t, nil, append(args, "-")...)
}

// Standard input is judged by what it holds, as a file is: a capture piped
// to digest is the wrong input (exit 1, naming analyze), and a slow log
// holding only the server's banner is an empty slow log (a note, exit 0).
func TestDigestStdinKind(t *testing.T) {
	pcap, err := os.ReadFile(capturesDir + "/errors.pcap.gz")
	if err != nil {
		t.Fatal(err)
	}
	_, err = digestStdin(t, pcap)
	if exitCode(err) != exitFailure || !strings.Contains(err.Error(), "pcap") || !strings.Contains(err.Error(), "analyze") {
		t.Errorf("pcap on stdin: exit %d (%v), want %d naming the capture and analyze", exitCode(err), err, exitFailure)
	}
	banner := "/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-log (Debian 12). started with:\n" +
		"Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock\nTime\t\t    Id Command\tArgument\n"
	if _, err := digestStdin(t, []byte(banner)); err != nil {
		t.Errorf("banner-only slow log on stdin: %v", err)
	}
}
