package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
)

const slowlogDir = "../../testdata/slowlogs"

func runDigestCmd(t *testing.T, stdin []byte, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd(collect.NewSecrets())
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(bytes.NewReader(stdin))
	root.SetArgs(append([]string{"digest"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

type digestJSON struct {
	Statements int64 `json:"statements"`
	TotalUS    int64 `json:"total_us"`
	Digests    []struct {
		Digest       string `json:"digest"`
		DigestText   string `json:"digest_text"`
		Calls        int64  `json:"calls"`
		LockUS       int64  `json:"lock_us"`
		RowsExamined int64  `json:"rows_examined"`
		Rows         int64  `json:"rows"`
		Errors       int64  `json:"errors"`
	} `json:"digests"`
	Notes   []string `json:"notes"`
	SlowLog struct {
		Events     int64 `json:"events"`
		HeaderOnly int64 `json:"header_only"`
	} `json:"slowlog"`
}

func TestDigestJSONSeveralFiles(t *testing.T) {
	events := filepath.Join(t.TempDir(), "ev.jsonl")
	out, err := runDigestCmd(t, nil, "--format", "json", "--events", events, "--tz", "UTC",
		slowlogDir+"/mysql-8.0-slow-extra.log", slowlogDir+"/percona-5.7.log")
	if err != nil {
		t.Fatal(err)
	}
	var r digestJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// 5 + 3 events; Query_time totals from the fixtures' .expect files.
	if r.Statements != 8 || r.SlowLog.Events != 8 || r.TotalUS != 31354606+1650090 {
		t.Fatalf("statements %d events %d total %d", r.Statements, r.SlowLog.Events, r.TotalUS)
	}
	var lock, examined, errs int64
	for _, d := range r.Digests {
		lock, examined, errs = lock+d.LockUS, examined+d.RowsExamined, errs+d.Errors
		if strings.Contains(d.DigestText, "A-100") || strings.Contains(d.DigestText, "1001") {
			t.Errorf("literal in digest text %q", d.DigestText)
		}
	}
	if lock != 3+0+100+10+8+120+0+900000 || examined != 1+0+500000+20+0+50000+0+1 || errs != 3 {
		t.Errorf("lock %d, rows examined %d, errors %d", lock, examined, errs)
	}
	b, err := os.ReadFile(events)
	if err != nil || bytes.Count(b, []byte("\n")) != 8 || !bytes.Contains(b, []byte(`"server_us":30000411`)) {
		t.Errorf("events file (%v):\n%s", err, b)
	}
}

func TestDigestTextStdinGzip(t *testing.T) {
	gz, err := os.ReadFile(slowlogDir + "/mysql-5.7-gzipped.log")
	if err != nil {
		t.Fatal(err)
	}
	out, err := digestStdin(t, gz, "--top", "2")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	var ranks int
	for sc.Scan() {
		if strings.HasPrefix(strings.TrimSpace(sc.Text()), "1 ") || strings.HasPrefix(strings.TrimSpace(sc.Text()), "2 ") {
			ranks++
		}
	}
	if !strings.Contains(out, "slow log: 5 events") || !strings.Contains(out, "exam") || ranks != 2 {
		t.Errorf("text output (%d ranked lines):\n%s", ranks, out)
	}
}

func TestDigestNotesForMalformedAndNonLogs(t *testing.T) {
	out, err := runDigestCmd(t, nil, "--format", "json", slowlogDir+"/malformed.log")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "4 slow-log events dropped: 1 header without statement, 2 statement text without header, 1 unreadable Query_time") {
		t.Errorf("no drop note:\n%s", out)
	}
	// Not a slow log: exit 1, saying what it is, and no empty table.
	out, err = runDigestCmd(t, nil, "--format", "json", "../../go.mod")
	if exitCode(err) != exitFailure || err == nil || !strings.Contains(err.Error(), "it is text") || out != "" {
		t.Errorf("not a slow log (%v):\n%s", err, out)
	}
}

func TestDigestUsageAndFailures(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--format", "xml", "x.log"},
		{"--top", "-1", "x.log"},
		{"--tz", "Mars/Olympus", "x.log"},
		{"--max-line", "10", "x.log"},
	} {
		if _, err := runDigestCmd(t, nil, args...); exitCode(err) != exitUsage {
			t.Errorf("digest %v: exit %d (%v), want %d", args, exitCode(err), err, exitUsage)
		}
	}
	_, err := runDigestCmd(t, nil, "/no/such/slow.log")
	if exitCode(err) != exitFailure || !strings.Contains(err.Error(), "/no/such/slow.log") {
		t.Errorf("missing file: exit %d (%v)", exitCode(err), err)
	}
}

// Grouped by fingerprint, digest makes the statement text only for the
// classes' samples (no --events, no --filter): the samples are the same as
// when every statement has its text (a filter that keeps everything).
func TestDigestFingerprintLazyTextSamples(t *testing.T) {
	for _, log := range []string{"mariadb-10.11-sysbench.log", "percona-5.7.log", "mysql-8.0-slow-extra.log"} {
		for _, keep := range []string{"--keep-literals=false", "--keep-literals"} {
			lazy := digestSamples(t, log, keep)
			eager := digestSamples(t, log, keep, "--filter", "query_time >= 0")
			if len(lazy) < 2 || len(lazy) != len(eager) {
				t.Fatalf("%s %s: %d classes lazily, %d eagerly", log, keep, len(lazy), len(eager))
			}
			for id, s := range lazy {
				if s == "" || s != eager[id] {
					t.Errorf("%s %s: class %s sample %q lazily, %q eagerly", log, keep, id, s, eager[id])
				}
			}
		}
	}
}

// digestSamples runs digest --group-by fingerprint and returns each
// class's sample (JSON) by its ID.
func digestSamples(t *testing.T, log string, args ...string) map[string]string {
	t.Helper()
	args = append([]string{"digest", "--format", "json", "--group-by", "fingerprint", "--top", "0"}, args...)
	out, stderr, err := runCmdSplit(context.Background(), append(args, filepath.Join(slowlogDir, log))...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, stderr)
	}
	var r struct {
		Digests []struct {
			Digest string          `json:"digest"`
			Sample json.RawMessage `json:"sample"`
		} `json:"digests"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	samples := map[string]string{}
	for _, d := range r.Digests {
		samples[d.Digest] = string(d.Sample)
	}
	return samples
}
