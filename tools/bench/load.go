package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/flashsale/platform/tools/loadgen"
)

// runner sends calls requests over conc workers and returns the answers and the wall
// time. Every scenario's load, HTTP or not, goes through one of these.
type runner func(ctx context.Context, label string, conc, calls int) ([]loadgen.Answer, time.Duration)

// callSeq numbers every call this process makes, whatever the runner, so request
// ids never repeat: a repeated id would be answered as a replay, not grabbed again.
var callSeq atomic.Int64

// httpRun drives base with loadgen (keep-alive connections, progress bar). gen gets
// the call's number (callSeq);
// seen, when set, is given every answer with its number once the run is over.
func httpRun(base string, gen func(n int64) loadgen.Call, seen func(n int64, a loadgen.Answer)) runner {
	return func(ctx context.Context, label string, conc, calls int) ([]loadgen.Answer, time.Duration) {
		ns := make([]int64, calls)
		start := time.Now()
		answers := loadgen.Run(ctx, loadgen.Config{BaseURL: base, Concurrency: conc, Calls: calls, Label: label},
			func(i int) loadgen.Call {
				ns[i] = callSeq.Add(1)
				return gen(ns[i])
			}, nil)
		elapsed := time.Since(start)
		if seen != nil {
			for _, a := range sent(answers) {
				seen(ns[a.Index], a)
			}
		}
		return answers, elapsed
	}
}

// funcRun drives fn the way loadgen drives HTTP: conc workers, a progress bar,
// one Answer per call (Result is what fn returns).
func funcRun(fn func(ctx context.Context, n int64) string) runner {
	return func(ctx context.Context, label string, conc, calls int) ([]loadgen.Answer, time.Duration) {
		var done atomic.Int64
		stopBar := loadgen.Progress(label, calls, &done)
		answers := make([]loadgen.Answer, calls)
		next := make(chan int)
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < conc; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					t := time.Now()
					r := fn(ctx, callSeq.Add(1))
					answers[i] = loadgen.Answer{Index: i, Status: 200, Result: r, Latency: time.Since(t)}
					done.Add(1)
				}
			}()
		}
	feed:
		for i := 0; i < calls; i++ {
			select {
			case next <- i:
			case <-ctx.Done():
				break feed
			}
		}
		close(next)
		wg.Wait()
		elapsed := time.Since(start)
		stopBar()
		return answers, elapsed
	}
}

func newBar(label string, calls int) *progressbar.ProgressBar {
	if label == "" {
		return nil
	}
	return progressbar.NewOptions(calls, progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(label), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
}

// Limits that keep every measurement bounded in count and in time.
const (
	minCalls = 200
	maxCalls = 400_000
)

// measure runs r at conc for about dur. Warm-up rounds (which also open the
// connections) run for at least a second and estimate the rate; the measured run's
// count is sized from it, and run once more, resized, if it ended in under half of
// dur (the estimate was off). Every run is cut at 3*dur+10s; answers never sent are dropped.
func measure(ctx context.Context, r runner, label string, conc int, dur time.Duration) measured {
	rate := 0.0
	for round, warmed := 0, time.Duration(0); round < 5 && warmed < time.Second; round++ {
		warmCtx, cancel := context.WithTimeout(ctx, dur+5*time.Second)
		answers, elapsed := r(warmCtx, "", conc, max(minCalls, conc*4))
		cancel()
		warmed += elapsed
		rate = float64(len(sent(answers))) / max(elapsed.Seconds(), 1e-3)
	}
	var m measured
	for round := 0; round < 2; round++ {
		calls := min(max(int(rate*dur.Seconds()), minCalls, conc*4), maxCalls)
		runCtx, cancel := context.WithTimeout(ctx, 3*dur+10*time.Second)
		cpu := sampleCPU()
		answers, elapsed := r(runCtx, label, conc, calls)
		m.CPU = cpuSince(cpu)
		cancel()
		m.Summary = loadgen.Summarize(sent(answers), elapsed)
		if elapsed >= dur/2 || calls == maxCalls {
			break
		}
		rate = m.Throughput()
	}
	return m
}

// rounds is how many times each side of a comparison is measured, the two sides
// taking turns; the ratio is of their medians. One run of either side swings by a
// third on a shared machine, and taking turns spreads whatever else runs over both.
const rounds = 3

// turns measures each side rounds times, the sides taking turns, after the stack has
// gone quiet before each run, and returns each side's median run by the rate of
// results (all answers when none given), in the order of sides.
func (b *bench) turns(ctx context.Context, results []string, sides ...func() measured) []measured {
	runs := make([][]measured, len(sides))
	for round := 1; round <= rounds && ctx.Err() == nil; round++ {
		fmt.Fprintf(os.Stderr, "   round %d/%d\n", round, rounds)
		for i, side := range sides {
			b.settle(20 * time.Second)
			runs[i] = append(runs[i], side())
			last := runs[i][len(runs[i])-1]
			report(last.Summary)
			reportCPU(last, results...)
		}
	}
	out := make([]measured, len(sides))
	for i := range sides {
		out[i] = medianRun(runs[i], results)
	}
	return out
}

func medianRun(runs []measured, results []string) measured {
	if len(runs) == 0 {
		return measured{}
	}
	runs = slices.Clone(runs)
	slices.SortFunc(runs, func(a, b measured) int {
		return cmp.Compare(perSecond(a.Summary, results...), perSecond(b.Summary, results...))
	})
	return runs[len(runs)/2]
}

// sent drops the answers of calls a cut-off run never sent.
func sent(answers []loadgen.Answer) []loadgen.Answer {
	out := answers[:0:0]
	for _, a := range answers {
		if a.Status != 0 || a.Result != "" {
			out = append(out, a)
		}
	}
	return out
}

// perSecond is the rate of answers whose result is one of results (all answers when none given).
func perSecond(s loadgen.Summary, results ...string) float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	n := 0
	if len(results) == 0 {
		n = s.Calls
	}
	for _, r := range results {
		n += s.ByResult[r]
	}
	return float64(n) / s.Elapsed.Seconds()
}

// report prints one run's outcome under its progress bar.
func report(s loadgen.Summary) {
	fmt.Fprintf(os.Stderr, "   %d answers in %s: %.0f/s  %s  p50 %s p99 %s\n", s.Calls, s.Elapsed.Round(1e6),
		s.Throughput(), resultMix(s), s.P50.Round(1e3), s.P99.Round(1e3))
}

// resultMix lists the answers by result, most frequent first.
func resultMix(s loadgen.Summary) string {
	out := ""
	for _, r := range s.Results() {
		if out != "" {
			out += " "
		}
		out += fmt.Sprintf("%s=%d", r, s.ByResult[r])
	}
	return out
}
