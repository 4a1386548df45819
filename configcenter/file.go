package configcenter

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"time"
)

// Source delivers switches documents; Watch blocks until ctx ends, calling apply
// with every document it sees (the same document may come again).
type Source interface {
	Watch(ctx context.Context, apply func(doc []byte)) error
}

// FileSource watches a local JSON file, the local stack's stand-in for Nacos. It
// polls (every 200 ms by default) rather than using inotify, because editors and
// `mv` replace the file, and a poll sees every way of writing it well inside 1 s.
type FileSource struct {
	Path     string
	Interval time.Duration
}

// Watch implements Source.
func (f FileSource) Watch(ctx context.Context, apply func(doc []byte)) error {
	every := f.Interval
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	var last []byte
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		doc, err := os.ReadFile(f.Path)
		if err == nil && !bytes.Equal(doc, last) {
			last = doc
			apply(doc)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			slog.Warn("switches file unreadable; keeping the last good document", "path", f.Path, "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Follow applies every valid document from src to h until ctx ends. A malformed
// one is rejected whole: logged, counted, and the last good snapshot stays.
func Follow(ctx context.Context, src Source, h *Holder, m *Metrics, log *slog.Logger) error {
	return src.Watch(ctx, func(doc []byte) {
		snap, err := Parse(doc)
		if err == nil {
			err = h.admits(snap)
		}
		if err != nil {
			m.rejected.Inc()
			log.Error("switches document rejected; keeping the last good one", "err", err.Error(), "kept", h.Load().MD5)
			return
		}
		if snap.MD5 == h.Load().MD5 {
			return
		}
		snap.AppliedAt = time.Now()
		h.Store(snap)
		m.applied(snap)
		log.Info("switches applied", "md5", snap.MD5, "grabEnabled", snap.GrabEnabled, "kafkaDegrade", snap.KafkaDegrade,
			"blocked", len(snap.BlockedPromotions))
	})
}
