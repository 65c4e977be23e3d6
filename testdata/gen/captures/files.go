package main

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// writeCapture copies the raw capture to dst, gzipped when asked. The gzip
// header carries no name or time, so equal captures give equal files.
func writeCapture(raw, dst string, gz bool) (err error) {
	in, err := os.Open(raw)
	if err != nil {
		return fmt.Errorf("reading capture: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("writing fixture: %w", err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("writing %s: %w", dst, cerr)
		}
	}()
	var w io.Writer = out
	var zw *gzip.Writer
	if gz {
		zw, _ = gzip.NewWriterLevel(out, gzip.BestCompression)
		w = zw
	}
	if _, err := io.Copy(w, in); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return fmt.Errorf("writing %s: %w", dst, err)
		}
	}
	return nil
}

// editcap runs editcap from tshark's package (packet selection, format
// conversion) with a context.
func editcap(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "editcap", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("editcap %v: %w\n%s", args, err, out)
	}
	return nil
}
