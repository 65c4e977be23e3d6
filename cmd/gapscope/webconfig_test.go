package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// testPKI is a throw-away CA with a server certificate for 127.0.0.1 and
// localhost and a client certificate, made for one test: no key is
// committed.
type testPKI struct {
	dir                   string
	caFile                string
	serverCert, serverKey string
	client                tls.Certificate
	pool                  *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gapscope test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{dir: dir, pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.caFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)
	sign := func(serial int64, cn string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key := newKey(t)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	der, key := sign(2, "localhost", x509.ExtKeyUsageServerAuth)
	p.serverCert = writePEM(t, dir, "server.pem", "CERTIFICATE", der)
	p.serverKey = writePEM(t, dir, "server-key.pem", "PRIVATE KEY", marshalKey(t, key))
	der, key = sign(3, "scraper", x509.ExtKeyUsageClientAuth)
	p.client, err = tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: marshalKey(t, key)}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func marshalKey(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	b, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// webConfigFile writes an exporter-toolkit web configuration: TLS with the
// PKI's server certificate, extra lines as given, and one basic-auth user
// whose password is stored as a bcrypt hash.
func (p *testPKI) webConfigFile(t *testing.T, user, password, extraTLS string) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\n%sbasic_auth_users:\n  %s: %s\n",
		p.serverCert, p.serverKey, extraTLS, user, hash)
	path := filepath.Join(p.dir, fmt.Sprintf("web-%d.yml", time.Now().UnixNano()))
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (p *testPKI) httpsClient(withCert bool) *http.Client {
	cfg := &tls.Config{RootCAs: p.pool}
	if withCert {
		cfg.Certificates = []tls.Certificate{p.client}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// get requests u with the basic-auth credentials given (none when user is
// "") and returns the status, or the transport's error.
func get(c *http.Client, u, user, password string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	r, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b), nil
}

// startSecured starts watch's HTTP server alone (no server to watch) with
// the web configuration, and stops it when the test ends.
func startSecured(t *testing.T, webConfig string) (string, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	port := freePort(t)
	x, err := startExporters(context.Background(), &log, exportFlags{http: fmt.Sprint(port), webConfig: webConfig, topDigests: 10}, nil)
	if err != nil {
		t.Fatalf("starting the HTTP server: %v", err)
	}
	t.Cleanup(func() {
		if err := x.stop(); err != nil {
			t.Errorf("stopping the HTTP server: %v", err)
		}
	})
	return fmt.Sprintf("127.0.0.1:%d", port), &log
}

// The web configuration's semantics as exporter-toolkit gives them: TLS,
// basic auth on the metrics and on the page, a client certificate
// required and checked against client_ca_file.
func TestWebConfigTLSAuthAndClientCA(t *testing.T) {
	p := newTestPKI(t)
	const user, password, wrong = "scraper", "c0rrect-h0rse", "wr0ng-battery"
	addr, log := startSecured(t, p.webConfigFile(t, user, password,
		fmt.Sprintf("  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: %s\n", p.caFile)))
	base := "https://" + addr
	c := p.httpsClient(true)
	for _, path := range []string{"/metrics", "/"} {
		if code, _, err := get(c, base+path, "", ""); err != nil || code != http.StatusUnauthorized {
			t.Errorf("%s without credentials: %d %v, want 401", path, code, err)
		}
		if code, _, err := get(c, base+path, user, wrong); err != nil || code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong password: %d %v, want 401", path, code, err)
		}
		if code, _, err := get(c, base+path, "nobody", password); err != nil || code != http.StatusUnauthorized {
			t.Errorf("%s as an unknown user: %d %v, want 401", path, code, err)
		}
	}
	if code, body, err := get(c, base+"/metrics", user, password); err != nil || code != http.StatusOK || !strings.Contains(body, "gapscope_") {
		t.Errorf("/metrics with the right password: %d %v, body %q", code, err, tailString(body, 200))
	}
	if code, body, err := get(c, base+"/", user, password); err != nil || code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("the page with the right password: %d %v, body %q", code, err, tailString(body, 200))
	}
	if _, _, err := get(p.httpsClient(false), base+"/metrics", user, password); err == nil {
		t.Error("a client without a certificate was served: client_auth_type is not applied")
	}
	if code, _, err := get(&http.Client{Timeout: 5 * time.Second}, "http://"+addr+"/metrics", user, password); err == nil && code == http.StatusOK {
		t.Error("plain HTTP was served on the TLS port")
	}
	if !strings.Contains(log.String(), "serving https://"+addr+"/") || !strings.Contains(log.String(), "basic auth (1 users)") {
		t.Errorf("the startup line does not say https with basic auth:\n%s", log)
	}
	for _, secret := range []string{password, wrong} {
		if strings.Contains(log.String(), secret) {
			t.Errorf("a password is in the server's output:\n%s", log)
		}
	}
}

// A bad file fails before watch starts, with the reason and never a
// password; basic auth without TLS is served but said to be in the clear.
func TestWebConfigRejectsBadFiles(t *testing.T) {
	p := newTestPKI(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const plain = "hunter2-plain"
	cases := map[string]struct{ path, want string }{
		"missing file":       {filepath.Join(dir, "absent.yml"), "no such file"},
		"unknown key":        {write("typo.yml", "tls_server_confg:\n  cert_file: x\n"), "tls_server_confg"},
		"plain password":     {write("plain.yml", "basic_auth_users:\n  alice: "+plain+"\n"), `"alice"'s entry is not a bcrypt hash`},
		"key missing":        {write("nokey.yml", "tls_server_config:\n  cert_file: "+p.serverCert+"\n"), "missing one of key or key_file"},
		"unreadable cert":    {write("nocert.yml", "tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: "+p.serverKey+"\n"), "cert_file"},
		"CA without policy":  {write("ca.yml", fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\n  client_ca_file: %s\n", p.serverCert, p.serverKey, p.caFile)), "without a Client Auth Policy"},
		"cert and wrong key": {write("mismatch.yml", fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\n", p.serverCert, writePEM(t, dir, "other.pem", "PRIVATE KEY", marshalKey(t, newKey(t))))), "X509KeyPair"},
	}
	for name, c := range cases {
		var log bytes.Buffer
		x, err := startExporters(context.Background(), &log, exportFlags{http: fmt.Sprint(freePort(t)), webConfig: c.path, topDigests: 10}, nil)
		if err == nil {
			_ = x.stop()
			t.Errorf("%s: served", name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "--web-config") {
			t.Errorf("%s: %q, want --web-config ... %q", name, err, c.want)
		}
		if strings.Contains(err.Error(), plain) {
			t.Errorf("%s: the error quotes the password: %v", name, err)
		}
	}
	if err := (&exportFlags{webConfig: "x.yml", topDigests: 1}).check(); err == nil {
		t.Error("--web-config without --http: no usage error")
	} else if _, ok := err.(usageError); !ok {
		t.Errorf("--web-config without --http: %v is not a usage error", err)
	}

	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	addr, log := startSecured(t, write("auth-only.yml", fmt.Sprintf("basic_auth_users:\n  bob: %s\n", hash)))
	if code, _, err := get(http.DefaultClient, "http://"+addr+"/metrics", "", ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("auth without TLS, no credentials: %d %v, want 401", code, err)
	}
	if code, _, err := get(http.DefaultClient, "http://"+addr+"/metrics", "bob", "pw"); err != nil || code != http.StatusOK {
		t.Errorf("auth without TLS, right password: %d %v, want 200", code, err)
	}
	if !strings.Contains(log.String(), "serving http://") || !strings.Contains(log.String(), "WITHOUT TLS") {
		t.Errorf("basic auth over plain HTTP is not called out:\n%s", log)
	}
}
