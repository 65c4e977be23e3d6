package slowlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"golang.org/x/sys/unix"
)

// slowEvents is n complete slow-log events, 5 lines each.
func slowEvents(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s# Query_time: 0.%06d  Lock_time: 0  Rows_sent: 1  Rows_examined: 1\nSET timestamp=%d;\nSELECT %d;\n",
			mariaHeader, i+1, 1700000000+i, i)
	}
	return b.String()
}

// interruptAfterAllRead writes text to w (one end of a pipe the reader
// holds), waits until the reader has taken every byte out of the pipe, then
// cancels: everything written was read by then, so all of it must count.
func interruptAfterAllRead(t *testing.T, w *os.File, text string, cancel context.CancelFunc) {
	t.Helper()
	if _, err := w.WriteString(text); err != nil {
		t.Error(err)
		return
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if n, err := unix.IoctlGetInt(int(w.Fd()), unix.TIOCINQ); err == nil && n == 0 {
			cancel()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Error("the reader never emptied the pipe")
	cancel()
}

// TestInterruptCountsAllRead: Ctrl-C on a digest reading a FIFO or stdin
// (input still open, the parser's batch not full) counts every event and
// line it read, not only the batches already handed over.
func TestInterruptCountsAllRead(t *testing.T) {
	const events = 300 // one full batch of 256 and a partly filled one
	text := slowEvents(events)
	fifo := filepath.Join(t.TempDir(), "slow.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, input := range []string{"fifo", "stdin"} {
		t.Run(input, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			path, w := fifo, (*os.File)(nil)
			if input == "stdin" {
				r, pw, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				old := os.Stdin
				os.Stdin, path, w = r, "-", pw
				defer func() { os.Stdin = old }()
			}
			type result struct {
				st  FileStats
				err error
			}
			var emitted atomic.Int64
			done := make(chan result, 1)
			go func() {
				st, err := ReadFile(ctx, path, ReadOptions{}, func(*event.Statement, *Event) { emitted.Add(1) })
				done <- result{st, err}
			}()
			if w == nil { // a FIFO's writer opens once the reader has
				var err error
				if w, err = os.OpenFile(fifo, os.O_WRONLY, 0); err != nil {
					t.Fatal(err)
				}
			}
			defer w.Close()
			interruptAfterAllRead(t, w, text, cancel)
			var res result
			select {
			case res = <-done:
			case <-time.After(time.Minute):
				t.Fatal("ReadFile did not return after the cancel")
			}
			if !errors.Is(res.err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", res.err)
			}
			if res.st.Events != events || emitted.Load() != events || res.st.Lines != 5*events || res.st.Bytes != int64(len(text)) {
				t.Errorf("read %d events in %d lines (%d bytes), emitted %d; want %d events in %d lines (%d bytes)",
					res.st.Events, res.st.Lines, res.st.Bytes, emitted.Load(), events, 5*events, len(text))
			}
		})
	}
}
