// Package stack reads .run/stack.json, the description of the running local stack
// that `make up` writes (docs/CONTRACT.md, "The local stack and its commands").
package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Ops are the services' ops listeners (/metrics, the probes, pprof).
type Ops struct {
	Grab  string `json:"grab"`
	Admin string `json:"admin"`
	Sink  string `json:"sink,omitempty"`
}

// File is .run/stack.json.
type File struct {
	Grab  string   `json:"grab"`
	Admin string   `json:"admin"`
	Sink  string   `json:"sink,omitempty"`
	Ops   Ops      `json:"ops"`
	Redis []string `json:"redis"`
	// Replicas, Sentinels and SentinelPrefix are set when the stack runs each shard
	// with a replica under Redis Sentinel (FLASHSALE_REPLICAS=1).
	Replicas       []string       `json:"replicas,omitempty"`
	Sentinels      []string       `json:"sentinels,omitempty"`
	SentinelPrefix string         `json:"sentinelPrefix,omitempty"`
	Kafka          []string       `json:"kafka"`
	MySQLDSN       string         `json:"mysqlDSN"`
	SwitchesFile   string         `json:"switchesFile"`
	LogsDir        string         `json:"logsDir,omitempty"` // .run/logs: one <name>.log per process
	Pids           map[string]int `json:"pids"`
}

// Root finds the repository root (the directory holding go.work) from the working directory up.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work found above the working directory")
		}
		dir = parent
	}
}

// Load reads the stack file at path; an empty path means <root>/.run/stack.json.
func Load(path string) (File, error) {
	var f File
	if path == "" {
		root, err := Root()
		if err != nil {
			return f, err
		}
		path = filepath.Join(root, ".run", "stack.json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("read stack file (is the local stack up? run `make up`): %w", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("parse stack file %s: %w", path, err)
	}
	if len(f.Redis) != 16 {
		return f, fmt.Errorf("stack file %s lists %d redis shards, want 16", path, len(f.Redis))
	}
	return f, nil
}

// DevOnCallToken is the local stack's on-call token (promo-admin --local).
const DevOnCallToken = "dev-oncall-token"

// Configctl is bin/configctl under root, run with args as on-call runs it on the
// local stack: against its switches file, through promo-admin (--api) under the
// development on-call token, so the change is validated and recorded by name.
func (f File) Configctl(ctx context.Context, root string, args ...string) *exec.Cmd {
	all := append([]string{"--file", f.SwitchesFile, "--api", f.Admin}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "configctl"), all...)
	cmd.Env = append(os.Environ(), "FLASHSALE_ONCALL_TOKEN="+DevOnCallToken)
	return cmd
}
