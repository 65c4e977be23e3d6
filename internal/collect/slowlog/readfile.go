package slowlog

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// ReadOptions configure ReadFile.
type ReadOptions struct {
	Parse   Options
	Convert ConvertOptions
	// Progress, when set, is called now and then with the bytes of the file
	// read so far and its size (0 when unknown, as for stdin).
	Progress func(done, total int64)
}

// FileStats is what ReadFile read from one file.
type FileStats struct {
	Stats
	// Own counts gapscope's own statements, left out.
	Own int64 `json:"own"`
	// Head is the start of the file's text (up to HeadBytes), to say what
	// an input without a single event holds.
	Head []byte `json:"-"`
}

// Add sums counts, for several files.
func (s *FileStats) Add(o FileStats) {
	s.Bytes += o.Bytes
	s.Lines += o.Lines
	s.Events += o.Events
	s.AdminCommands += o.AdminCommands
	s.HeaderOnly += o.HeaderOnly
	s.Orphans += o.Orphans
	s.Malformed += o.Malformed
	s.BadValues += o.BadValues
	s.TruncatedLines += o.TruncatedLines
	s.Restarts += o.Restarts
	s.Own += o.Own
}

// EmitFunc receives each statement with the event it came from (for the
// slow-log fields a Statement has no place for). Both are reused for the
// next event: copy what you keep (*s copies a statement).
type EmitFunc func(s *event.Statement, ev *Event)

// ReadFile parses the slow log at path ("-" for stdin, gzip or plain) and
// calls emit for each statement, on the caller's goroutine, while another
// goroutine parses ahead. When ctx is cancelled ReadFile stops and returns
// what it counted so far with ctx's error.
func ReadFile(ctx context.Context, path string, opts ReadOptions, emit EmitFunc) (FileStats, error) {
	src, err := Open(path)
	if err != nil {
		return FileStats{}, err
	}
	defer src.Close()
	st, err := read(ctx, src, opts, emit)
	st.Head = src.Head()
	if err != nil && ctx.Err() == nil {
		err = fmt.Errorf("%s: %w", path, err)
	}
	return st, err
}

// Batches carry parsed events from the parsing goroutine to the caller's
// goroutine, which normalizes them and calls emit: parsing and digesting
// then use a core each. A few fixed batches are recycled, so memory is
// bounded whatever the file size.
const (
	batchEvents = 256
	batchCount  = 4
)

type batch struct {
	ev    [batchEvents]Event
	n     int
	err   error // io.EOF after the last event, or a read error
	stats Stats // the parser's counts when the batch was sent
}

func read(ctx context.Context, src *Source, opts ReadOptions, emit EmitFunc) (FileStats, error) {
	p := NewParser(src.Reader, opts.Parse)
	free, full := make(chan *batch, batchCount), make(chan *batch, batchCount)
	for range batchCount {
		free <- new(batch)
	}
	stop := make(chan struct{})
	go parseBatches(p, free, full, stop)
	c := consumer{conv: NewConverter(opts.Convert), emit: emit}
	err := c.run(ctx, src, opts.Progress, full, free)
	if ctx.Err() != nil {
		// Before stop: a parser told to stop while it waits for a free
		// batch would drop what it read but had not parsed yet.
		c.drain(src, full, free)
		close(stop)
	} else {
		close(stop)
		for range full { // let the parser finish
		}
	}
	// Events counts what the caller got (own statements included).
	c.stats.Events = c.n
	return FileStats{Stats: c.stats, Own: c.own}, err
}

// parseBatches fills free batches until the input ends or stop is closed.
func parseBatches(p *Parser, free <-chan *batch, full chan<- *batch, stop <-chan struct{}) {
	defer close(full)
	for {
		var b *batch
		select {
		case b = <-free:
		case <-stop:
			return
		}
		b.n, b.err = 0, nil
		for b.n < batchEvents && b.err == nil {
			if b.err = p.NextInto(&b.ev[b.n]); b.err == nil {
				b.n++
			}
		}
		b.stats = p.Stats()
		full <- b
		if b.err != nil {
			return
		}
	}
}

// consumer converts and emits the events of each batch in order.
type consumer struct {
	conv   *Converter
	emit   EmitFunc
	st     event.Statement
	own, n int64
	stats  Stats // of the last batch received
}

func (c *consumer) run(ctx context.Context, src *Source, progress func(done, total int64), full <-chan *batch, free chan<- *batch) error {
	for {
		var b *batch
		select {
		case b = <-full:
		case <-ctx.Done():
			return fmt.Errorf("stopped after %d events: %w", c.n, ctx.Err())
		}
		if b == nil {
			return nil
		}
		c.batch(b)
		if progress != nil {
			progress(src.Consumed(), src.Size)
		}
		if b.err == io.EOF {
			return nil
		}
		if b.err != nil {
			return b.err
		}
		free <- b
	}
}

// drainGrace bounds the wait for the parser after an interruption, for an
// input whose blocked read cannot be interrupted.
const drainGrace = time.Second

// drain, after a cancel, interrupts the input and takes every event the
// parser has read (its partly filled batch included), so that a stopped
// run counts all it read, not the last full batch.
func (c *consumer) drain(src *Source, full <-chan *batch, free chan<- *batch) {
	src.Interrupt()
	grace := time.NewTimer(drainGrace)
	defer grace.Stop()
	for {
		select {
		case b, ok := <-full:
			if !ok {
				return
			}
			c.batch(b)
			free <- b // never blocks: free holds every batch there is
		case <-grace.C:
			return
		}
	}
}

func (c *consumer) batch(b *batch) {
	for i := range b.n {
		if c.conv.Statement(&b.ev[i], &c.st) {
			c.emit(&c.st, &b.ev[i])
		} else {
			c.own++
		}
	}
	c.n += int64(b.n)
	c.stats = b.stats
}
