package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
)

// machine is what every figure was measured on.
type machine struct {
	Cores            int
	CPU, Kernel      string
	MemGiB           float64
	Go, Redis, MySQL string
}

func readMachine(ctx context.Context, rdb *redis.Client, db *sqlx.DB) machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version(), CPU: "unknown", Kernel: "unknown", Redis: "unknown", MySQL: "unknown"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %f kB", &kb); err == nil {
			m.MemGiB = kb / (1 << 20)
		}
	}
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				m.Redis = v
			}
		}
	}
	_ = db.GetContext(ctx, &m.MySQL, "SELECT VERSION()")
	return m
}

func (m machine) String() string {
	return fmt.Sprintf("%d cores (%s), %.0f GiB, Linux %s; %s; Redis %s; MySQL/MariaDB %s",
		m.Cores, m.CPU, m.MemGiB, m.Kernel, m.Go, m.Redis, m.MySQL)
}

// loadAverage is the machine's 1-minute load average: what else competed for the
// cores while the figures were taken.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}
