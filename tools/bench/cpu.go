package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/tools/loadgen"
)

// A rate on two shared cores swings with whatever else the machine runs; the CPU a
// process spends per answer barely does. So every measured run also records the CPU
// time of every process on the machine, by role, and the report gives each
// comparison a second time in CPU per answer: the same ratio, counted in the
// resource the rate is bounded by, and where the time goes.

// tick is one clock tick of /proc/<pid>/stat (USER_HZ, 100 on Linux).
const tick = 10 * time.Millisecond

// Roles of the processes whose CPU is counted, in the order the report lists them.
const (
	roleLoad     = "load generator (bin/bench)"
	roleBaseline = "baseline handler (bin/bench --serve)"
	roleGrab     = "grab-service"
	roleAdmin    = "promo-admin"
	roleSink     = "flow sink (bin/recovery sink)"
	roleKafka    = "Kafka broker"
	roleRedis    = "redis-server (all)"
	// roleRedisHot is the hot shard's redis-server alone, a detail of roleRedis
	// (counted there too, so not in the sum): what a grant costs the shard that
	// bounds a hot promotion, and the rest what it costs the other fifteen.
	roleRedisHot = "redis-server (the hot shard, in the row above)"
	roleMySQL    = "MariaDB"
	roleOther    = "other processes"
)

var roles = []string{roleLoad, roleBaseline, roleGrab, roleAdmin, roleSink, roleKafka, roleRedis, roleMySQL, roleOther}

// roleByComm names a process by its command name (at most 15 characters in /proc).
var roleByComm = map[string]string{
	"bench": roleBaseline, "grab-service": roleGrab, "promo-admin": roleAdmin, "recovery": roleSink,
	"kafka-broker": roleKafka, "redis-server": roleRedis, "mariadbd": roleMySQL, "mysqld": roleMySQL,
}

// hotRedisPid is the hot shard's redis-server (0 until the bench has asked it).
var hotRedisPid atomic.Int64

func roleOf(pid int, comm string) string {
	if pid == os.Getpid() {
		return roleLoad // a bench process too, but the one generating the load
	}
	if r, ok := roleByComm[comm]; ok {
		return r
	}
	return roleOther
}

// procTicks reads one process's command name and CPU time (user + system, all
// threads, in clock ticks) from /proc/<pid>/stat.
func procTicks(pid int) (string, int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	// The command name is in parentheses and may hold spaces: fields resume past the last ')'.
	s := string(b)
	open, shut := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || shut < open {
		return "", 0, false
	}
	f := strings.Fields(s[shut+1:])
	if len(f) <= 12 {
		return "", 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return s[open+1 : shut], u + k, true
}

// procCPU is one process's role and the CPU time it had used, in clock ticks.
type procCPU struct {
	role  string
	ticks int64
}

// cpuSample is the CPU time every process had used at one moment, by pid.
type cpuSample map[int]procCPU

func sampleCPU() cpuSample {
	out := cpuSample{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, t, ok := procTicks(pid); ok {
			out[pid] = procCPU{roleOf(pid, comm), t}
		}
	}
	return out
}

// cpuUse is the CPU time spent by role between two samples. A process that
// started meanwhile counts from zero; one that ended is lost (none of ours does
// mid-run).
type cpuUse map[string]time.Duration

func cpuSince(before cpuSample) cpuUse {
	out := cpuUse{}
	for pid, p := range sampleCPU() {
		d := p.ticks - before[pid].ticks
		if b, ok := before[pid]; ok && b.role != p.role { // the pid was reused
			d = p.ticks
		}
		if d > 0 {
			out[p.role] += time.Duration(d) * tick
			if int64(pid) == hotRedisPid.Load() && p.role == roleRedis {
				out[roleRedisHot] += time.Duration(d) * tick
			}
		}
	}
	return out
}

func (u cpuUse) total() time.Duration {
	var t time.Duration
	for role, d := range u {
		if role != roleRedisHot { // counted in roleRedis already
			t += d
		}
	}
	return t
}

// measured is one measured run: what the load generator saw, and the CPU every
// process on the machine spent meanwhile.
type measured struct {
	loadgen.Summary
	CPU cpuUse
}

// cpuPer is µs of CPU per answer whose result is one of results (every answer when
// none given), by role and in all; nil when no such answer came.
func (r measured) cpuPer(results ...string) map[string]float64 {
	n := r.Calls
	if len(results) > 0 {
		n = 0
		for _, res := range results {
			n += r.ByResult[res]
		}
	}
	if n == 0 || r.CPU == nil {
		return nil
	}
	out := map[string]float64{}
	for role, d := range r.CPU {
		out[role] = float64(d.Microseconds()) / float64(n)
	}
	out[cpuAll] = float64(r.CPU.total().Microseconds()) / float64(n)
	return out
}

// reportCPU prints a run's CPU per answer by role under its progress bar: what
// else was busy is the first question about a run that came out slow.
func reportCPU(m measured, results ...string) {
	per := m.cpuPer(results...)
	if per == nil {
		return
	}
	var parts []string
	for _, role := range rowsOfCPU {
		if v := per[role]; v >= 0.5 {
			parts = append(parts, fmt.Sprintf("%s %.0f", role, v))
		}
	}
	fmt.Fprintf(os.Stderr, "   µs of CPU per answer: %s\n", strings.Join(parts, ", "))
}

// cpuAll is the key of the sum over every role in cpuPer's map.
const cpuAll = "all processes"

// rowsOfCPU is every role, then the sum: the rows of cpuPer's map in report order.
var rowsOfCPU = append(slices.Insert(slices.Clone(roles), slices.Index(roles, roleRedis)+1, roleRedisHot), cpuAll)

// findHotRedis learns the hot shard's redis-server pid from the server itself
// (INFO server), for its row of the CPU table. Not found, the row stays empty.
func findHotRedis(ctx context.Context, c *redis.Client) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			if pid, err := strconv.ParseInt(v, 10, 64); err == nil {
				hotRedisPid.Store(pid)
			}
		}
	}
}

// cpuColumn is one side of one comparison in the CPU table.
type cpuColumn struct {
	Title string
	Per   map[string]float64 // cpuPer
}

// cpuComparison is one scenario's two sides counted in CPU per answer.
type cpuComparison struct {
	N          int
	Ours, Base cpuColumn
}

// ratio is the comparison in the sense of the main table (above 1 means ours does
// better): the baseline's CPU per answer over ours.
func (c cpuComparison) ratio() float64 {
	return c.Base.Per[cpuAll] / c.Ours.Per[cpuAll]
}

// cpuScope says what the CPU table counts.
const cpuScope = "The CPU time (user + system, from /proc) every process on the machine spent during the median measured run " +
	"of each side, divided by that run's answers (GRANTED ones where the scenario counts grants). On a machine whose cores " +
	"are all busy, a rate is the cores over the CPU per answer, so the last line is the main table's comparison counted " +
	"in the resource that bounds it, and it moves far less than a rate when other programs take a share of the cores."

// cpuTable lists µs of CPU per answer by role, a column per side of each comparison,
// then the total and the ratio.
func (res *results) cpuTable() table {
	t := table{head: []string{"process (µs of CPU per answer)"}}
	var cols []cpuColumn
	for _, c := range res.CPU {
		cols = append(cols, c.Ours, c.Base)
	}
	for _, c := range cols {
		t.head = append(t.head, c.Title)
	}
	for _, role := range rowsOfCPU {
		row := []string{role}
		used := role == cpuAll // the sum always shows; a role only where it spent something
		for _, c := range cols {
			v := c.Per[role]
			used = used || v >= 0.5
			row = append(row, fmt.Sprintf("%.0f", v))
		}
		if used {
			t.rows = append(t.rows, row)
		}
	}
	ratio := []string{"baseline ÷ ours (the main table's ratio, in CPU)"}
	for _, c := range res.CPU {
		ratio = append(ratio, ratioText(c.ratio()), "")
	}
	t.rows = append(t.rows, ratio)
	return t
}

// addCPU records a scenario's comparison in CPU per answer, unless a side has no answers.
func (res *results) addCPU(n int, ours, base measured, oursTitle, baseTitle string, results ...string) {
	o, b := ours.cpuPer(results...), base.cpuPer(results...)
	if o == nil || b == nil {
		return
	}
	res.CPU = append(res.CPU, cpuComparison{N: n, Ours: cpuColumn{oursTitle, o}, Base: cpuColumn{baseTitle, b}})
	slices.SortStableFunc(res.CPU, func(x, y cpuComparison) int { return x.N - y.N })
}
