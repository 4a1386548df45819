package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// scratchDB is a database of the benchmark's own on the stack's MySQL server,
// dropped when the benchmark ends.
type scratchDB struct {
	server *sqlx.DB // connection without a database, to create and drop it
	DB     *sqlx.DB
	Name   string
	DSN    string
}

func openScratch(ctx context.Context, stackDSN, name string) (*scratchDB, error) {
	cfg, err := mysql.ParseDSN(stackDSN)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	cfg.DBName = ""
	server, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	if _, err := server.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		server.Close()
		return nil, fmt.Errorf("create scratch database %s: %w", name, err)
	}
	cfg.DBName = name
	cfg.ParseTime = true
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		server.Close()
		return nil, err
	}
	return &scratchDB{server: server, DB: db, Name: name, DSN: cfg.FormatDSN()}, nil
}

func (s *scratchDB) drop() {
	s.DB.Close()
	_, _ = s.server.Exec("DROP DATABASE IF EXISTS " + s.Name)
	s.server.Close()
}

// lockSchema is the seed articles' "traditional" design: a stock row locked for
// every grab and a flow row inserted in the same transaction.
var lockSchema = []string{
	`CREATE TABLE stock (id INT PRIMARY KEY, total BIGINT NOT NULL, remaining BIGINT NOT NULL) ENGINE=InnoDB`,
	`CREATE TABLE flow (id BIGINT AUTO_INCREMENT PRIMARY KEY, request_id VARCHAR(128) NOT NULL,
	  pin VARCHAR(128) NOT NULL, ip VARCHAR(64) NOT NULL, num BIGINT NOT NULL,
	  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), UNIQUE KEY flow_request (request_id)) ENGINE=InnoDB`,
	`INSERT INTO stock (id, total, remaining) VALUES (1, 1000000000, 1000000000)`,
}

func setupLockDB(ctx context.Context, db *sqlx.DB) error {
	for _, q := range lockSchema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("lock baseline schema: %w", err)
		}
	}
	return nil
}

type lockAnswer struct {
	RequestID string `json:"requestId"`
	Result    string `json:"result"`
	Remaining int64  `json:"remaining,omitempty"`
	Message   string `json:"message,omitempty"`
}

// lockHandler grabs by row lock: BEGIN; SELECT ... FOR UPDATE; UPDATE; INSERT; COMMIT.
func lockHandler(db *sqlx.DB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			RequestID string `json:"requestId"`
			Pin       string `json:"pin"`
			IP        string `json:"ip"`
			Items     []struct {
				Num int64 `json:"num"`
			} `json:"items"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Items) != 1 {
			writeLock(w, http.StatusBadRequest, lockAnswer{Result: "INVALID_REQUEST"})
			return
		}
		ans, err := lockGrab(r.Context(), db, req.RequestID, req.Pin, req.IP, req.Items[0].Num)
		switch {
		case err != nil:
			writeLock(w, http.StatusServiceUnavailable, lockAnswer{RequestID: req.RequestID, Result: "UNAVAILABLE", Message: err.Error()})
		case ans.Result == "GRANTED":
			writeLock(w, http.StatusOK, ans)
		default:
			writeLock(w, http.StatusConflict, ans)
		}
	})
}

func lockGrab(ctx context.Context, db *sqlx.DB, rid, pin, ip string, num int64) (lockAnswer, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return lockAnswer{}, err
	}
	defer func() { _ = tx.Rollback() }()
	var remaining int64
	if err := tx.QueryRowContext(ctx, `SELECT remaining FROM stock WHERE id = 1 FOR UPDATE`).Scan(&remaining); err != nil {
		return lockAnswer{}, err
	}
	if remaining < num {
		return lockAnswer{RequestID: rid, Result: "SOLD_OUT"}, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE stock SET remaining = remaining - ? WHERE id = 1`, num); err != nil {
		return lockAnswer{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO flow (request_id, pin, ip, num) VALUES (?, ?, ?, ?)`, rid, pin, ip, num); err != nil {
		return lockAnswer{}, err
	}
	if err := tx.Commit(); err != nil {
		return lockAnswer{}, err
	}
	return lockAnswer{RequestID: rid, Result: "GRANTED", Remaining: remaining - num}, nil
}

func writeLock(w http.ResponseWriter, status int, a lockAnswer) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}
