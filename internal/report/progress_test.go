package report

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock advances only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestProgressNotTTY(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, 100, "reading")
	p.Set(50)
	p.Done()
	if b.Len() != 0 {
		t.Errorf("progress on a buffer wrote %q", b.String())
	}
	f, err := os.CreateTemp(t.TempDir(), "progress")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p = NewProgress(f, 100, "reading") // a regular file is no terminal
	p.Set(50)
	p.Done()
	if st, _ := f.Stat(); st.Size() != 0 {
		t.Errorf("progress on a file wrote %d bytes", st.Size())
	}
}

func TestProgressDrawsRateLimited(t *testing.T) {
	var b bytes.Buffer
	clk := &fakeClock{time.Unix(1000, 0)}
	p := newProgress(&b, 100_000_000, "reading", true, 80, clk.now)
	clk.t = clk.t.Add(2 * time.Second)
	p.Set(25_000_000)
	first := b.String()
	want := "\rreading [========>                        ]  25% 25.0MB/100MB 12.5MB/s ETA 0:06\x1b[K"
	if first != want {
		t.Errorf("line\n got %q\nwant %q", first, want)
	}
	if n := len([]rune(strings.Trim(first, "\r\x1b[K"))); n != 79 {
		t.Errorf("line of %d runes, want 79 (the width, less the last column)", n)
	}
	clk.t = clk.t.Add(redrawEvery / 2)
	p.Set(26_000_000)
	if b.String() != first {
		t.Errorf("redrew within %v", redrawEvery)
	}
	clk.t = clk.t.Add(redrawEvery)
	p.Set(30_000_000)
	if strings.Count(b.String(), "\r") != 2 || !strings.Contains(b.String(), " 30% ") {
		t.Errorf("no redraw after %v: %q", redrawEvery, b.String())
	}
	p.Done()
	if !strings.HasSuffix(b.String(), "\r\x1b[K") {
		t.Errorf("Done did not clear the line: %q", b.String())
	}
	n := b.Len()
	clk.t = clk.t.Add(time.Second)
	p.Set(40_000_000)
	if b.Len() != n {
		t.Error("drew after Done")
	}
}

func TestProgressUnknownTotal(t *testing.T) {
	var b bytes.Buffer
	clk := &fakeClock{time.Unix(1000, 0)}
	p := newProgress(&b, 0, "stdin", true, 80, clk.now)
	clk.t = clk.t.Add(time.Second)
	p.Set(1_500_000)
	if want := "\rstdin 1.50MB 1.50MB/s\x1b[K"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestProgressNarrow(t *testing.T) {
	var b bytes.Buffer
	clk := &fakeClock{time.Unix(1000, 0)}
	p := newProgress(&b, 100, "reading", true, 30, clk.now)
	p.Set(100)
	if strings.Contains(b.String(), "[=") {
		t.Errorf("bar drawn in 30 columns: %q", b.String())
	}
}

func TestProgressConcurrent(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, 1000, "x", true, 80, time.Now)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				p.Set(int64(g*1000 + i))
			}
		})
	}
	wg.Go(p.Done)
	wg.Wait()
}
