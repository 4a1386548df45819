package shardmark

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// Serving reports close the gap between a rebuild lifting a shard's fence and the
// grab-service instances noticing it on their next poll: each instance writes, on
// every read of the markers, whether it now serves the shard, stamped with the
// server's clock of that read (promo.ServingKey, one field per instance). The
// rebuild returns only once every live instance has reported serving from a read
// made after the fence was lifted (AwaitServing), so its exit means "sales are back".

// ReportStale is how long an instance may stay silent before it is taken for gone:
// instances poll every 200 ms, so two seconds is ten polls missed. A gone instance
// serves no one, so the rebuild does not wait for it.
const ReportStale = 2 * time.Second

// reportForget is when a gone instance's report is removed, so the hash holds only
// instances of the last minute however often pods are replaced.
const reportForget = time.Minute

// Instance names this process in serving reports.
func Instance(service string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s:%d", service, host, os.Getpid())
}

// Report records that instance, reading the markers at the server time at, does or
// does not serve shard.
func Report(ctx context.Context, c redis.UniversalClient, shard int, instance string, at time.Time, serving bool) error {
	v := strconv.FormatInt(at.UnixMicro(), 10) + " fenced"
	if serving {
		v = strconv.FormatInt(at.UnixMicro(), 10) + " serving"
	}
	if err := c.HSet(ctx, promo.ServingKey(shard), instance, v).Err(); err != nil {
		return fmt.Errorf("report serving state of shard %d: %w", shard, err)
	}
	return nil
}

// AwaitServing waits until every instance reporting on shard, silent for no longer
// than ReportStale, has reported serving it from a read made after this call began.
// It returns the instances that do; after timeout, an error naming those that do not.
func AwaitServing(ctx context.Context, c redis.UniversalClient, shard int, timeout, every time.Duration) ([]string, error) {
	since, err := c.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("await grab-service on shard %d: read the server's clock: %w", shard, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		serving, waiting, err := readReports(ctx, c, shard, since)
		switch {
		case err != nil:
			return nil, err
		case len(waiting) == 0:
			return serving, nil
		case time.Now().After(deadline):
			return serving, fmt.Errorf("shard %d: grab-service instance(s) %s still refuse it %s after its fence was lifted "+
				"(see their /readyz fencedShards)", shard, strings.Join(waiting, ", "), timeout)
		}
		select {
		case <-ctx.Done():
			return serving, ctx.Err()
		case <-time.After(every):
		}
	}
}

// readReports sorts the live instances of shard's reports into those serving it
// since the given server time and the others; reports gone for long are removed.
func readReports(ctx context.Context, c redis.UniversalClient, shard int, since time.Time) (serving, waiting []string, err error) {
	var now *redis.TimeCmd
	var all *redis.MapStringStringCmd
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		all = p.HGetAll(ctx, promo.ServingKey(shard))
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("read the serving reports of shard %d: %w", shard, err)
	}
	var gone []string
	for instance, v := range all.Val() {
		at, state, ok := parseReport(v)
		switch age := now.Val().Sub(at); {
		case !ok || age > reportForget:
			gone = append(gone, instance)
		case age > ReportStale:
		case state == "serving" && !at.Before(since):
			serving = append(serving, instance)
		default:
			waiting = append(waiting, instance)
		}
	}
	if len(gone) > 0 {
		_ = c.HDel(ctx, promo.ServingKey(shard), gone...).Err() // tidying only: retried by the next call
	}
	slices.Sort(serving)
	slices.Sort(waiting)
	return serving, waiting, nil
}

func parseReport(v string) (time.Time, string, bool) {
	us, state, ok := strings.Cut(v, " ")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil {
		return time.Time{}, "", false
	}
	return time.UnixMicro(n), state, true
}
