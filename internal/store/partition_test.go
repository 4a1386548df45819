package store_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Why grab_flow is not range-partitioned by time (docs/record-bounds.md), asked of
// the server itself, in the test's own database:
//   - it refuses to partition grab_flow by occurred_at as the table is: every unique
//     key (the primary key, the record's deduplication key) must hold the column;
//   - with occurred_at added to the keys, the table takes a second CANCEL of one
//     request and promotion that carries another time (the reconciler's, after a
//     failover lost the first), which grab_flow refuses: the units would be given
//     back twice when two writers race past InsertFlows' lookup;
//   - the sink's lookup by request id and the rebuild's read of one promotion name no
//     time, so they read every partition.
//
// If grab_flow is ever partitioned, the first step fails here: read the document.
func TestGrabFlowKeysForbidTimePartitions(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	db := s.DB()
	const parts = ` PARTITION BY RANGE COLUMNS(occurred_at) (
 PARTITION p202601 VALUES LESS THAN ('2026-02-01'), PARTITION p202602 VALUES LESS THAN ('2026-03-01'),
 PARTITION p202603 VALUES LESS THAN ('2026-04-01'), PARTITION pmax VALUES LESS THAN (MAXVALUE))`

	_, err := db.ExecContext(ctx, `ALTER TABLE grab_flow`+parts)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1503 {
		t.Fatalf("partitioning grab_flow by occurred_at: %v; want error 1503 (a unique key without the partitioning column)", err)
	}

	for _, q := range []string{
		`CREATE TABLE flow_parted LIKE grab_flow`,
		`ALTER TABLE flow_parted DROP PRIMARY KEY, ADD PRIMARY KEY (id, occurred_at),
 DROP KEY grab_flow_request, ADD UNIQUE KEY grab_flow_request (request_id, kind, promo_id, promo_type, occurred_at)`,
		`ALTER TABLE flow_parted` + parts,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", strings.Fields(q)[0], err)
		}
	}
	insert := func(table, kind string, at time.Time) error {
		_, err := db.ExecContext(ctx, `INSERT INTO `+table+` (event_id, kind, request_id, pin, ip, promo_id, promo_type, num, shard, occurred_at)
 VALUES (?, ?, 'r1', 'pin', '10.0.0.1', 'P', 1, 1, 3, ?)`, kind+at.Format(time.RFC3339Nano), kind, at)
		return err
	}
	grab := time.Date(2026, 1, 31, 23, 59, 59, 0, time.UTC)
	rollback, reconciler := grab.Add(500*time.Millisecond), grab.Add(1200*time.Millisecond) // across a month boundary: two partitions
	for _, table := range []string{"grab_flow", "flow_parted"} {
		if err := insert(table, "GRAB", grab); err != nil {
			t.Fatalf("%s: GRAB: %v", table, err)
		}
		if err := insert(table, "CANCEL", rollback); err != nil {
			t.Fatalf("%s: first CANCEL: %v", table, err)
		}
	}
	if err := insert("grab_flow", "CANCEL", reconciler); !errors.As(err, &me) || me.Number != 1062 {
		t.Fatalf("grab_flow took a second CANCEL of r1 (%v); its unique key must refuse it", err)
	}
	if err := insert("flow_parted", "CANCEL", reconciler); err != nil {
		t.Fatalf("the partitioned copy refused the second CANCEL (%v): the reason in docs/record-bounds.md no longer holds", err)
	}
	var returned int64
	if err := db.GetContext(ctx, &returned, `SELECT SUM(num) FROM flow_parted WHERE kind = 'CANCEL' AND request_id = 'r1'`); err != nil || returned != 2 {
		t.Fatalf("the partitioned copy gives back %d units of a 1-unit grant (%v), want 2", returned, err)
	}

	for _, q := range []string{
		`SELECT request_id, kind, promo_id, promo_type FROM flow_parted WHERE request_id IN ('r1', 'r2')`, // InsertFlows' lookup
		`SELECT kind, SUM(num) FROM flow_parted WHERE promo_id = 'P' AND promo_type = 1 GROUP BY kind`,    // FlowCounters
	} {
		partitions, err := explainPartitions(ctx, db.DB, q)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(partitions, ",") != 3 {
			t.Fatalf("%s reads partitions %q; want all four", q, partitions)
		}
	}
}

// explainPartitions is the partitions column of EXPLAIN PARTITIONS q's one row.
func explainPartitions(ctx context.Context, db *sql.DB, q string) (string, error) {
	rows, err := db.QueryContext(ctx, `EXPLAIN PARTITIONS `+q)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out string
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		for i, c := range cols {
			if c == "partitions" {
				out = vals[i].String
			}
		}
	}
	return out, rows.Err()
}
