package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/sandbox"
)

// Debian's Prometheus scrapes watch over TLS with basic auth, as it
// scrapes any exporter configured with a web config file, and answers a
// query on what it scraped; requests without or with wrong credentials get
// 401 and the wrong password appears nowhere in watch's output.
func TestWebConfigPrometheusScrapesOverTLS(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON"}})
	if _, err := exec.LookPath("prometheus"); err != nil {
		t.Fatal("prometheus is not installed (make deps installs it)")
	}
	p := newTestPKI(t)
	const user, password, wrong = "prometheus", "s3cret-scrape-pw", "n0t-the-pw-at-all"
	webConfig := p.webConfigFile(t, user, password, "")
	dir := t.TempDir()
	port := freePort(t)
	target := fmt.Sprintf("127.0.0.1:%d", port)
	prom := startPrometheusTLS(t, dir, target, p.caFile, user, password)
	db := loadSchema(t, inst)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var stdout, stderr string
	var werr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		stdout, stderr, werr = runCmdSplit(wctx, "watch", "--dsn", inst.DSN(""), "--duration", "20s", "--no-live",
			"--cpu-budget", "0", "--http", fmt.Sprint(port), "--web-config", webConfig, "--http-linger", "2s")
	}()
	c := p.httpsClient(false)
	waitStatus(t, c, "https://"+target+"/metrics", http.StatusUnauthorized)
	loadDone := runLoad(ctx, db, 4*time.Second)

	for _, path := range []string{"/metrics", "/"} {
		if code, _, err := get(c, "https://"+target+path, "", ""); err != nil || code != http.StatusUnauthorized {
			t.Errorf("%s without credentials: %d %v, want 401", path, code, err)
		}
		if code, _, err := get(c, "https://"+target+path, user, wrong); err != nil || code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong password: %d %v, want 401", path, code, err)
		}
	}
	<-loadDone
	// Prometheus scrapes every second: wait for a scrape that saw the load.
	var seen float64
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		up, err := promQuery(t, prom, `up{job="gapscope"}`, time.Now())
		res, err2 := promQuery(t, prom, `sum(gapscope_statements_seen_total{job="gapscope"})`, time.Now())
		if err == nil && err2 == nil && len(up) == 1 && up[0].float(t) == 1 && len(res) == 1 {
			if seen = res[0].float(t); seen > 0 {
				break
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if seen <= 0 {
		t.Errorf("Prometheus never scraped watch's statements over TLS with basic auth (seen %v)", seen)
	}
	stopWatch() // as Ctrl-C: watch prints its report and stops serving
	<-done
	if werr != nil {
		t.Fatalf("watch: %v\n%s", werr, stderr)
	}
	t.Logf("Prometheus counted %v statements seen", seen)
	if !strings.Contains(stderr, "serving https://"+target+"/") {
		t.Errorf("watch does not say it serves https:\n%s", stderr)
	}
	for _, secret := range []string{password, wrong} {
		if strings.Contains(stdout+stderr, secret) {
			t.Errorf("a password appears in watch's output:\n%s\n%s", stdout, stderr)
		}
	}
	if log, err := os.ReadFile(filepath.Join(dir, "prometheus.log")); err == nil && strings.Contains(string(log), "server returned HTTP status 401") {
		t.Errorf("Prometheus was refused a scrape:\n%s", tailString(string(log), 2000))
	}
}

// startPrometheusTLS runs Debian's prometheus scraping target over https,
// trusting caFile, with basic-auth credentials, every second.
func startPrometheusTLS(t *testing.T, dir, target, caFile, user, password string) string {
	t.Helper()
	pwFile := filepath.Join(dir, "scrape-password")
	if err := os.WriteFile(pwFile, []byte(password), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: gapscope
    scrape_interval: 1s
    scrape_timeout: 900ms
    scheme: https
    tls_config:
      ca_file: %s
    basic_auth:
      username: %s
      password_file: %s
    static_configs:
      - targets: ['%s']
`, caFile, user, pwFile, target)
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	startProcess(t, dir, "prometheus", "prometheus", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address=127.0.0.1:"+fmt.Sprint(port))
	waitHTTP(t, base+"/-/ready")
	return base
}

// waitStatus waits until u answers with the status code.
func waitStatus(t *testing.T, c *http.Client, u string, code int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := c.Get(u); err == nil {
			r.Body.Close()
			if r.StatusCode == code {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not answer %d within 60 s", u, code)
}
