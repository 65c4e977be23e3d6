//go:build linux

// Command wirebench runs gapscope's wire-only path alone on a live
// interface for a while and prints, as one JSON line, what it cost: the
// statements decoded, the CPU the process used (user + system, from
// getrusage) and the packets the kernel or the queue dropped. It is the
// measuring end of scripts/bench-wire.sh, which drives the load.
//
// -mode decode runs the live capture as watch does (ring, kernel filter,
// tracker, MySQL decoding, digests, one event.Statement per statement;
// GAPSCOPE_CAPTURE=ebpf: the header-only eBPF capture instead of the ring);
// -mode tap only reads the ring (capture.Tap), to tell the kernel tap's
// cost from gapscope's own work; -mode tcx-tap and tcx-count are the same
// floor through an eBPF program instead of the ring (tcx.go); -mode
// tcx-head hands over a fixed-size record per packet instead: its TCP/IP
// header's fields, the first -head and last -tail bytes of its payload
// (tcxhead.go).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/event"
)

type result struct {
	Mode        string  `json:"mode"`
	Seconds     float64 `json:"seconds"`
	Statements  int64   `json:"statements"`
	Errors      int64   `json:"errors"`
	Packets     int64   `json:"packets"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	USPerStmt   float64 `json:"us_per_statement"`
	KernelDrops int64   `json:"kernel_drops"`
	Gaps        int64   `json:"gaps"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "wirebench:", err)
		os.Exit(1)
	}
}

func run() error {
	iface := flag.String("iface", "lo", "interface to capture")
	port := flag.Uint("port", 3306, "server port")
	dur := flag.Duration("duration", 10*time.Second, "how long to capture")
	mode := flag.String("mode", "decode", "decode (the wire-only path), tap (read the ring, decode nothing), tcx-tap (the same through an eBPF program and a BPF ring buffer), tcx-count (the eBPF program counts the port's packets, copies none) or tcx-head (a fixed-size record per packet: headers, the payload's first -head and last -tail bytes)")
	head := flag.Int("head", 64, "tcx-head: the payload's first bytes kept per packet")
	tail := flag.Int("tail", 16, "tcx-head: the payload's last bytes kept per packet (after the head)")
	wakeKB := flag.Int("wake-kb", 1024, "tcx-head: wake the reader when this many KiB of records wait (0: never, the reader polls every -poll)")
	poll := flag.Duration("poll", 100*time.Millisecond, "tcx-head: the reader's timer")
	snap := flag.Int("answer-snap", 0, "tap mode: cut server answers to this many bytes in the kernel filter (0: whole)")
	blockKB := flag.Int("block-kb", 0, "ring block size in KiB (0: capture's default)")
	ringMB := flag.Int("ring-mb", 0, "ring size in MiB (0: capture's default)")
	prof := flag.String("cpuprofile", "", "write a CPU profile of the capture here")
	flag.Parse()
	if *port == 0 || *port > 65535 || (*mode != "decode" && *mode != "tap" && *mode != "tcx-tap" && *mode != "tcx-count" && *mode != "tcx-head") || *dur <= 0 || *poll <= 0 {
		fmt.Fprintln(os.Stderr, "wirebench: need -port 1..65535, -mode decode|tap|tcx-tap|tcx-count|tcx-head, a positive -duration and -poll")
		os.Exit(2)
	}
	opts := capture.LiveOptions{Options: capture.Options{Ports: []uint16{uint16(*port)}}, RingMB: *ringMB, BlockKB: *blockKB}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *prof != "" {
		f, err := os.Create(*prof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	r := result{Mode: *mode}
	var err error
	var cpu0 float64
	var t0 time.Time
	start := func() { cpu0, t0 = cpuSeconds(), time.Now() }
	switch *mode {
	case "tap":
		r, err = runTap(ctx, *iface, opts, *snap, *dur, start)
	case "tcx-tap", "tcx-count":
		r, err = runTCX(ctx, *iface, uint16(*port), *mode == "tcx-count", *ringMB, *dur, start)
	case "tcx-head":
		r, err = runTCXHead(ctx, *iface, uint16(*port), *head, *tail, *wakeKB, *ringMB, *poll, *dur, start)
	default:
		r, err = runDecode(ctx, *iface, opts, *dur, start)
	}
	if err != nil {
		return err
	}
	r.CPUSeconds, r.Seconds = cpuSeconds()-cpu0, time.Since(t0).Seconds()
	if r.Statements > 0 {
		r.USPerStmt = r.CPUSeconds * 1e6 / float64(r.Statements)
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// runDecode runs the live capture; start is called once the ring is open
// and filtered, so that opening it is not counted. The source is
// $GAPSCOPE_CAPTURE's (ebpf: the header-only capture; by default auto,
// which keeps the ring here: no server rows are read).
func runDecode(ctx context.Context, iface string, opts capture.LiveOptions, dur time.Duration, start func()) (result, error) {
	l, err := capture.OpenSource(iface, opts)
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var stmts, errs int64
	start()
	st, err := l.Run(ctx, func(s *event.Statement) {
		stmts++
		if s.Error != nil {
			errs++
		}
	})
	mode := "decode"
	if st.Source != capture.SourcePacket {
		mode += " " + st.Source
	}
	return result{Mode: mode, Statements: stmts, Errors: errs, Packets: st.Packets,
		KernelDrops: st.KernelDrops, Gaps: st.Gaps}, err
}

func runTap(ctx context.Context, iface string, opts capture.LiveOptions, snap int, dur time.Duration, start func()) (result, error) {
	tap, err := capture.OpenTap(iface, opts, snap)
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	start()
	st, err := tap.Run(ctx)
	return result{Mode: "tap", Packets: st.Frames, KernelDrops: st.KernelDrops}, err
}

// cpuSeconds is the user + system CPU this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
