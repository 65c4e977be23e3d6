package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// makeCerts writes a throwaway CA and a server certificate signed by it into
// dir (ca.pem, server-cert.pem, server-key.pem) for the TLS fixture.
func makeCerts(ctx context.Context, dir string) error {
	p := func(n string) string { return filepath.Join(dir, n) }
	steps := [][]string{
		{"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=gapscope fixture CA",
			"-keyout", p("ca-key.pem"), "-out", p("ca.pem")},
		{"req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
			"-keyout", p("server-key.pem"), "-out", p("server-req.pem")},
		{"x509", "-req", "-days", "3650", "-set_serial", "1", "-in", p("server-req.pem"),
			"-CA", p("ca.pem"), "-CAkey", p("ca-key.pem"), "-out", p("server-cert.pem")},
	}
	for _, args := range steps {
		if out, err := exec.CommandContext(ctx, "openssl", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("openssl %s: %w\n%s", args[0], err, out)
		}
	}
	return nil
}
