package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Scenarios driven by the mariadb and mariadb-admin command-line clients.

var largeResults = []struct {
	sql  string
	rows int
}{
	{"SELECT * FROM fx.big", 100000},
	{"SELECT * FROM fx.big WHERE id <= 1000", 1000},
	{"SELECT k, COUNT(*) FROM fx.big GROUP BY k", 1000},
	{"SELECT id, c FROM fx.big ORDER BY id DESC LIMIT 10", 10},
	{"SELECT COUNT(*) FROM fx.big", 1},
}

func runLargeResults(ctx context.Context, e *env) (map[string]any, error) {
	var script strings.Builder
	var stmts []map[string]any
	want := 0
	for _, q := range largeResults {
		script.WriteString(q.sql + ";\n")
		stmts = append(stmts, map[string]any{"sql": q.sql, "rows": q.rows})
		want += q.rows + 1 // + the header line
	}
	out, err := e.cli(ctx, nil, script.String())
	if err != nil {
		return nil, err
	}
	if got := strings.Count(string(out), "\n"); got != want {
		return nil, fmt.Errorf("client printed %d lines, want %d", got, want)
	}
	return map[string]any{"client": "mariadb --batch", "statements": stmts}, nil
}

func runAdmin(ctx context.Context, e *env) (map[string]any, error) {
	args := []string{"--no-defaults", "-h127.0.0.1", fmt.Sprintf("-P%d", e.inst.Port), "-uroot", "--skip-ssl",
		"ping", "status", "processlist"}
	if out, err := exec.CommandContext(ctx, "mariadb-admin", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb-admin: %w\n%s", err, out)
	}
	if _, err := e.cli(ctx, nil, "USE fx;\nSELECT DATABASE();\n"); err != nil {
		return nil, err
	}
	return map[string]any{
		"connections": []map[string]any{
			{"client": "mariadb-admin ping status processlist", "sent": []string{"COM_PING", "COM_STATISTICS", "COM_QUERY SHOW PROCESSLIST"}},
			{"client": "mariadb --batch", "sent": []string{"COM_INIT_DB fx", "COM_QUERY SELECT DATABASE()"}},
		},
	}, nil
}

const loadRows = 2000

// runLoadData sends a CSV with LOAD DATA LOCAL INFILE: the server answers
// the query with a 0xFB request for the file, the client streams it and an
// empty packet, then the server's OK.
func runLoadData(ctx context.Context, e *env) (map[string]any, error) {
	csv := filepath.Join(e.work, "load.csv")
	var b strings.Builder
	for i := 1; i <= loadRows; i++ {
		fmt.Fprintf(&b, "%d,name-%05d,%d.%02d\n", i, i, i*3, i%100)
	}
	if err := os.WriteFile(csv, []byte(b.String()), 0o644); err != nil {
		return nil, fmt.Errorf("writing csv: %w", err)
	}
	load := fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE fx.loaded FIELDS TERMINATED BY ','", csv)
	out, err := e.cli(ctx, []string{"--local-infile=1", "--skip-column-names"}, load+";\nSELECT COUNT(*) FROM fx.loaded;\n")
	if err != nil {
		return nil, err
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(loadRows) {
		return nil, fmt.Errorf("loaded %q rows, want %d", got, loadRows)
	}
	return map[string]any{"client": "mariadb --local-infile=1", "file_bytes": b.Len(), "rows_loaded": loadRows,
		"statements": []string{"LOAD DATA LOCAL INFILE '<csv>' INTO TABLE fx.loaded FIELDS TERMINATED BY ','",
			"SELECT COUNT(*) FROM fx.loaded"}}, nil
}

// runCompressed checks that the session really negotiated compression.
func runCompressed(ctx context.Context, e *env) (map[string]any, error) {
	script := "SHOW SESSION STATUS LIKE 'Compression';\nSELECT 1;\nSELECT * FROM fx.big WHERE id <= 2000;\n" +
		"SELEC oops;\nINSERT INTO fx.kv VALUES (200, 'compressed');\nSELECT v FROM fx.kv WHERE id = 200;\n"
	out, err := e.cli(ctx, []string{"--compress", "--force", "--skip-column-names"}, script)
	if err != nil && !strings.Contains(err.Error(), "1064") {
		return nil, err
	}
	if !strings.HasPrefix(string(out), "Compression\tON") {
		return nil, fmt.Errorf("session not compressed: %.40q", out)
	}
	return map[string]any{"client": "mariadb --compress --force", "statements": strings.Split(strings.TrimSpace(script), "\n"),
		"rows": []int{1, 1, 2000, 0, 0, 1}, "error_codes": []int{1064}}, nil
}

// runTLS checks that the session really ran over TLS.
func runTLS(ctx context.Context, e *env) (map[string]any, error) {
	script := "SHOW SESSION STATUS LIKE 'Ssl_cipher';\nSELECT COUNT(*) FROM fx.big;\nSELECT * FROM fx.big WHERE id <= 100;\n"
	out, err := e.cli(ctx, []string{"--ssl", "--ssl-ca=" + filepath.Join(e.work, "ca.pem"), "--skip-column-names"}, script)
	if err != nil {
		return nil, err
	}
	first, _, _ := strings.Cut(string(out), "\n")
	cipher := strings.TrimSpace(strings.TrimPrefix(first, "Ssl_cipher"))
	if cipher == "" {
		return nil, fmt.Errorf("session not encrypted: %.60q", out)
	}
	return map[string]any{"client": "mariadb --ssl", "cipher": cipher,
		"statements": strings.Split(strings.TrimSpace(script), "\n"), "rows": []int{1, 1, 100}}, nil
}

func checkTLS(exp *expect) error {
	if exp.TLSRecords == 0 {
		return fmt.Errorf("tshark saw no TLS records")
	}
	return nil
}

const blobSize = 17 << 20

// blobText is a deterministic, compressible 17 MiB payload of plain letters
// (no escaping in SQL, small once gzipped).
func blobText() string {
	const unit = "gapscope-blob-abcdefghijklmnopqrstuvwxyz-"
	s := strings.Repeat(unit, blobSize/len(unit)+1)
	return s[:blobSize]
}

// runBlob moves a 17 MiB value both ways twice: in a text COM_QUERY (CLI)
// and in a prepared COM_STMT_EXECUTE and binary row (go-sql-driver).
func runBlob(ctx context.Context, e *env) (map[string]any, error) {
	blob := blobText()
	script := "INSERT INTO fx.blobs VALUES (1, '" + blob + "');\nSELECT id, LENGTH(b), b FROM fx.blobs WHERE id = 1;\n"
	out, err := e.cli(ctx, []string{"--max-allowed-packet=64M", "--skip-column-names"}, script)
	if err != nil {
		return nil, err
	}
	if want := "1\t" + strconv.Itoa(blobSize) + "\t" + blob[:64]; !strings.HasPrefix(string(out), want) {
		return nil, fmt.Errorf("text blob did not come back: %.80q", out)
	}
	prepared, err := preparedBlob(ctx, e, blob)
	if err != nil {
		return nil, err
	}
	return map[string]any{"blob_bytes": blobSize, "connections": []map[string]any{
		{"client": "mariadb --max-allowed-packet=64M", "statements": []string{
			"INSERT INTO fx.blobs VALUES (1, '<17 MiB>')", "SELECT id, LENGTH(b), b FROM fx.blobs WHERE id = 1"}},
		prepared,
	}}, nil
}
