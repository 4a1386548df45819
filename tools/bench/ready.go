package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// checkFences refuses to measure a grab-service that fences shards (lost and not
// rebuilt, or being rebuilt; its ops listener's /readyz names them): its grabs
// there answer UNAVAILABLE, and the spread would measure refusals.
func checkFences(ctx context.Context, grab string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, grab+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("grab-service /readyz: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("grab-service is not ready: %d %s", resp.StatusCode, body)
	}
	var r struct {
		Fenced []struct {
			Shard int    `json:"shard"`
			Why   string `json:"why"`
		} `json:"fencedShards"`
	}
	_ = json.Unmarshal(body, &r) // an older grab-service says less; nothing is fenced then
	if len(r.Fenced) == 0 {
		return nil
	}
	var shards []int
	for _, f := range r.Fenced {
		shards = append(shards, f.Shard)
	}
	return fmt.Errorf("grab-service fences shards %v (%s); rebuild them first (bin/recovery rebuild --missing) and run again", shards, r.Fenced[0].Why)
}
