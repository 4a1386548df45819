package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flashsale/platform/configcenter"
)

// tool runs one command against one store.
type tool struct {
	o           options
	store       configcenter.Store
	stdin       io.Reader
	out, errOut io.Writer
	historyPath string
	admin       *admin // nil without --api
}

func (t tool) get(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return usageError("get takes no arguments")
	}
	cur, err := t.store.Get(ctx)
	if err != nil {
		return err
	}
	if cur.MD5 == "" {
		return fmt.Errorf("%s holds no switches document (services run with the defaults)", t.store.Describe())
	}
	fmt.Fprintf(t.errOut, "md5 %s  %s\n", cur.MD5, t.store.Describe())
	if _, err := configcenter.Parse(cur.Content); err != nil {
		fmt.Fprintf(t.errOut, "warning: services reject this document and keep their last good one: %v\n", err)
	}
	_, err = t.out.Write(withNewline(cur.Content))
	return err
}

// set changes one key of the document in force and publishes it over that version.
func (t tool) set(ctx context.Context, args []string) error {
	ifMD5, args, err := parseIfMD5("set", args)
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return usageError("set takes KEY VALUE")
	}
	cur, err := t.read(ctx, ifMD5)
	if err != nil {
		return err
	}
	next, err := setKey(cur.Content, args[0], args[1])
	if err != nil {
		return err
	}
	return t.publish(ctx, cur, next, fmt.Sprintf("set %s %s", args[0], args[1]))
}

// put publishes a whole document: the way to repair one that no longer parses.
func (t tool) put(ctx context.Context, args []string) error {
	ifMD5, args, err := parseIfMD5("put", args)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usageError("put takes FILE")
	}
	next, err := readInput(args[0], t.stdin)
	if err != nil {
		return err
	}
	if _, err := configcenter.Parse(next); err != nil {
		return fmt.Errorf("not published: %w", err)
	}
	cur, err := t.read(ctx, ifMD5)
	if err != nil {
		return err
	}
	return t.publish(ctx, cur, next, "put "+args[0])
}

// read returns the document in force, or ErrConflict if it is not ifMD5.
func (t tool) read(ctx context.Context, ifMD5 string) (configcenter.Document, error) {
	cur, err := t.store.Get(ctx)
	if err != nil {
		return cur, err
	}
	if ifMD5 != "" && cur.MD5 != ifMD5 {
		return cur, fmt.Errorf("%w: in force is md5 %q, not %s", configcenter.ErrConflict, cur.MD5, ifMD5)
	}
	return cur, nil
}

func (t tool) publish(ctx context.Context, cur configcenter.Document, next []byte, change string) error {
	if string(next) == string(cur.Content) {
		fmt.Fprintf(t.out, "unchanged: md5 %s already in force\n", cur.MD5)
		return nil
	}
	switch {
	case t.admin != nil:
		return t.publishThroughAdmin(ctx, cur, next, change)
	case t.o.breakGlass == "":
		return errNoWritePath
	}
	change = fmt.Sprintf("break-glass (%s): %s", t.o.breakGlass, change)
	fmt.Fprintf(t.errOut, "break-glass: writing %s directly; promo-admin records the change as DETECTED, without your name: "+
		"say who and why (%s) in the incident channel\n", t.store.Describe(), t.o.breakGlass)
	if err := t.store.Publish(ctx, next, cur.MD5); err != nil {
		if errors.Is(err, configcenter.ErrConflict) {
			if now, gerr := t.store.Get(ctx); gerr == nil {
				return fmt.Errorf("%w (read md5 %q, now md5 %q); run get and decide again", err, cur.MD5, now.MD5)
			}
		}
		return err
	}
	after := configcenter.Document{Content: next, MD5: md5Hex(next)}
	fmt.Fprintf(t.out, "published md5 %s over %q to %s\n", after.MD5, cur.MD5, t.store.Describe())
	printDiff(t.out, cur.Content, next)
	t.logLocally(cur, after, change)
	return nil
}

// publishThroughAdmin sends the change to promo-admin, which validates it,
// publishes it over cur and records it under the token's name.
func (t tool) publishThroughAdmin(ctx context.Context, cur configcenter.Document, next []byte, change string) error {
	reason := t.o.reason
	if reason == "" {
		reason = change
	}
	r, err := t.admin.put(ctx, next, cur.MD5, reason)
	if err != nil {
		if errors.Is(err, configcenter.ErrConflict) {
			return fmt.Errorf("%w (read md5 %q); run get and decide again", err, cur.MD5)
		}
		return fmt.Errorf("not published: %w", err)
	}
	if !r.Changed || r.Entry == nil {
		fmt.Fprintf(t.out, "unchanged: md5 %s already in force\n", r.MD5)
		return nil
	}
	fmt.Fprintf(t.out, "published md5 %s over %q to %s through promo-admin: history entry %d, by %s, %s\n",
		r.MD5, cur.MD5, t.store.Describe(), r.Entry.ID, r.Entry.Actor.Name, r.Entry.Outcome)
	printDiff(t.out, cur.Content, next)
	t.logLocally(cur, configcenter.Document{Content: next, MD5: r.MD5}, change)
	return nil
}

// logLocally appends the change to the local history log, which diff reads.
func (t tool) logLocally(cur, after configcenter.Document, change string) {
	e := entry{At: time.Now().UTC(), User: t.o.user, Store: t.store.Describe(), Change: change,
		PrevMD5: cur.MD5, MD5: after.MD5, Content: after.Content, Prev: string(cur.Content)}
	if err := appendHistory(t.historyPath, e); err != nil {
		// The publish stands; only the local record of it is missing.
		fmt.Fprintf(t.errOut, "warning: published, but not recorded in %s: %v\n", t.historyPath, err)
	}
}

func (t tool) diff(ctx context.Context, args []string) error {
	if len(args) > 1 {
		return usageError("diff takes at most FILE")
	}
	cur, err := t.store.Get(ctx)
	if err != nil {
		return err
	}
	if len(args) == 1 {
		proposed, err := readInput(args[0], t.stdin)
		if err != nil {
			return err
		}
		fmt.Fprintf(t.out, "in force (md5 %q) -> %s (md5 %s)\n", cur.MD5, args[0], md5Hex(proposed))
		printDiff(t.out, cur.Content, proposed)
		if _, err := configcenter.Parse(proposed); err != nil {
			fmt.Fprintf(t.out, "note: services would reject %s: %v\n", args[0], err)
		}
		return nil
	}
	hist, err := readHistory(t.historyPath)
	if err != nil {
		return err
	}
	if len(hist) == 0 {
		return fmt.Errorf("no history in %s to compare with", t.historyPath)
	}
	last := hist[len(hist)-1]
	if last.MD5 != cur.MD5 {
		fmt.Fprintf(t.out, "note: the document in force (md5 %q) is not the last one published through this log (md5 %s): someone else changed it\n", cur.MD5, last.MD5)
		fmt.Fprintf(t.out, "md5 %s (%s, %s) -> in force md5 %q\n", last.MD5, last.At.Format(time.RFC3339), last.User, cur.MD5)
		printDiff(t.out, last.Content, cur.Content)
		return nil
	}
	// The last publish is in force: show what it changed.
	fmt.Fprintf(t.out, "md5 %q -> in force md5 %s (%s, %s: %s)\n", last.PrevMD5, cur.MD5, last.At.Format(time.RFC3339), last.User, last.Change)
	printDiff(t.out, []byte(last.Prev), cur.Content)
	return nil
}

func (t tool) showHistory(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return usageError("history takes no arguments")
	}
	if t.admin != nil {
		return t.showAdminHistory(ctx)
	}
	hist, err := readHistory(t.historyPath)
	if err != nil {
		return err
	}
	if len(hist) == 0 {
		fmt.Fprintf(t.out, "no versions recorded in %s\n", t.historyPath)
		return nil
	}
	for _, e := range hist {
		fmt.Fprintf(t.out, "%s  %-12s md5 %s  was %-32s  %s\n", e.At.Format(time.RFC3339), e.User, e.MD5, orNone(e.PrevMD5), e.Change)
	}
	return nil
}

func parseIfMD5(cmd string, args []string) (string, []string, error) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ifMD5 := fs.String("if-md5", "", "publish only over this version")
	if err := fs.Parse(args); err != nil {
		return "", nil, usageError(fmt.Sprintf("%s: %v", cmd, err))
	}
	return *ifMD5, fs.Args(), nil
}

func readInput(path string, stdin io.Reader) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

func withNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return append(append([]byte(nil), b...), '\n')
	}
	return b
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// showAdminHistory prints promo-admin's switch history, oldest of the newest 50 first.
func (t tool) showAdminHistory(ctx context.Context) error {
	entries, err := t.admin.history(ctx, 50)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		fmt.Fprintln(t.out, "no changes recorded by promo-admin")
		return nil
	}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		who := e.Actor.Name
		if e.Via == "DETECTED" {
			who = "(outside the API)"
		}
		fmt.Fprintf(t.out, "%s  %-18s %-11s md5 %s  was %-32s  %s\n", e.At.Format(time.RFC3339), who, e.Outcome, e.AfterMD5, orNone(e.BeforeMD5), e.Reason)
		for _, c := range e.Changes {
			fmt.Fprintf(t.out, "    %s: %s -> %s\n", c.Switch, orAbsent(c.Before), orAbsent(c.After))
		}
	}
	return nil
}
