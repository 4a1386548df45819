// Command configctl is the on-call tool for the flash-sale switches document
// (docs/CONTRACT.md, "Config center"): read it, change one switch, compare versions,
// and list what was published. Every change is validated with the services' own
// parser before it is published, and published as a compare-and-set over the
// version read, so two engineers never overwrite each other blindly. A change goes
// through promo-admin (--api, PUT /v1/switches), which records it under on-call's
// token name in the switch history; writing the store directly is the break-glass
// way (--break-glass REASON), for when promo-admin cannot take it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/flashsale/platform/configcenter"
)

// Exit codes: scripts can tell a lost compare-and-set from other failures.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitConflict = 3
)

const usage = `usage: configctl (--file PATH | --nacos HOST:PORT [--namespace NS] [--group G] [--data-id ID] [--username U])
                 [--api URL | --break-glass REASON] [--reason TEXT]
                 [--history PATH] [--user NAME] [--timeout D] [--verbose] COMMAND

commands:
  get                        print the document in force (its md5 on stderr)
  set [--if-md5 MD5] KEY VALUE
                             change one switch, validate the result, and publish it over the
                             version just read (or only over MD5, the version you looked at)
  put [--if-md5 MD5] FILE    validate and publish a whole document (- reads stdin)
  diff [FILE]                FILE against the document in force; without FILE, the document in
                             force against the version before it in the history
  history                    with --api: the switch history promo-admin keeps, oldest of the
                             newest 50 first; otherwise the versions published through this
                             history log, oldest first

A change (set, put) goes through promo-admin: --api URL (default $FLASHSALE_PROMO_ADMIN_URL)
with on-call's token in FLASHSALE_ONCALL_TOKEN; promo-admin validates it, publishes it over the
version read and records who, when, why (--reason, default the command) and what in its switch
history. --break-glass REASON writes the store directly, for when promo-admin cannot: the
change is logged locally with REASON, and promo-admin records it once it sees it in force,
as DETECTED, without a name (say who and why in the incident channel).

KEY is grabEnabled, kafkaDegrade, degradeRateFactor, degradeMaxPerSecond, methodLimits.grab, methodLimits.cancel,
methodLimits, blockedPromotions, blockedPins or blockedIps. VALUE is JSON (false, 0.5, 200, ["A_1"]);
for the three lists also +ENTRY to add one entry and -ENTRY to remove one (a promotion as
<promoId>_<type>, a pin, an address or a CIDR range such as 10.1.0.0/16).
KEY shardAddrs.N (N = 0..15) points shard N at another Redis master, VALUE host:port
(a failover to a promoted replica; every service follows within a second), or - to
return it to the address its flags name.
The Nacos password, if any, comes from FLASHSALE_NACOS_PASSWORD; FLASHSALE_NACOS_TLS=true
speaks TLS to Nacos, verified against the CAs in FLASHSALE_NACOS_CA_FILE.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// options are the global flags.
type options struct {
	file, nacos, namespace, group, dataID, username string
	history, user                                   string
	api, breakGlass, reason                         string
	timeout                                         time.Duration
	verbose                                         bool
}

// run is the whole tool; main only supplies the process's streams and environment.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	o, fs, ok := parseOptions(args, stderr, getenv)
	if !ok {
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	store, err := o.open(getenv, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "configctl: %v\n", err)
		return exitFailed
	}
	defer store.Close()
	t := tool{o: o, store: store, stdin: stdin, out: stdout, errOut: stderr, historyPath: o.historyPath()}
	if o.api != "" {
		if t.admin, err = newAdmin(o.api, getenv(OnCallTokenEnv), o.timeout); err != nil {
			return exitCode(err, stderr)
		}
	}
	return exitCode(t.command(ctx, fs.Arg(0), fs.Args()[1:]), stderr)
}

// parseOptions reads the global flags; ok is false (usage printed) when they do
// not name one store and a command.
func parseOptions(args []string, stderr io.Writer, getenv func(string) string) (options, *flag.FlagSet, bool) {
	var o options
	fs := flag.NewFlagSet("configctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	fs.StringVar(&o.file, "file", "", "switches document file (the local stack's)")
	fs.StringVar(&o.nacos, "nacos", "", "Nacos server host:port (main port; gRPC is port+1000)")
	fs.StringVar(&o.namespace, "namespace", "", "Nacos namespace id (empty = public)")
	fs.StringVar(&o.group, "group", configcenter.Group, "Nacos group")
	fs.StringVar(&o.dataID, "data-id", configcenter.DataID, "Nacos dataId")
	fs.StringVar(&o.username, "username", "", "Nacos username (password from FLASHSALE_NACOS_PASSWORD)")
	fs.StringVar(&o.history, "history", "", "history log (default PATH.history.jsonl, or ~/.flashsale/configctl-<server>.history.jsonl for Nacos)")
	fs.StringVar(&o.user, "user", getenv("USER"), "who is publishing, for the history log")
	fs.StringVar(&o.api, "api", getenv("FLASHSALE_PROMO_ADMIN_URL"), "promo-admin's base URL: changes go through its PUT /v1/switches (token from "+OnCallTokenEnv+")")
	fs.StringVar(&o.breakGlass, "break-glass", "", "write the store directly, for REASON, when promo-admin cannot take the change")
	fs.StringVar(&o.reason, "reason", "", "why, for the switch history (default: the command)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound on the whole command")
	fs.BoolVar(&o.verbose, "verbose", false, "show the Nacos SDK's own warnings")
	if err := fs.Parse(args); err != nil {
		return o, fs, false
	}
	if (o.file == "") == (o.nacos == "") || fs.NArg() == 0 {
		fmt.Fprint(stderr, usage)
		return o, fs, false
	}
	if o.api != "" && o.breakGlass != "" {
		fmt.Fprint(stderr, "configctl: --api and --break-glass are two ways to write; give one\n\n"+usage)
		return o, fs, false
	}
	return o, fs, true
}

// command runs one of the tool's commands.
func (t tool) command(ctx context.Context, cmd string, rest []string) error {
	switch cmd {
	case "get":
		return t.get(ctx, rest)
	case "set":
		return t.set(ctx, rest)
	case "put":
		return t.put(ctx, rest)
	case "diff":
		return t.diff(ctx, rest)
	case "history":
		return t.showHistory(ctx, rest)
	}
	return usageError(fmt.Sprintf("unknown command %q", cmd))
}

// exitCode reports err on stderr and maps it to the tool's exit status.
func exitCode(err error, stderr io.Writer) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "configctl: %v\n\n%s", err, usage)
		return exitUsage
	case errors.Is(err, configcenter.ErrConflict):
		fmt.Fprintf(stderr, "configctl: conflict: %v\n", err)
		return exitConflict
	default:
		fmt.Fprintf(stderr, "configctl: %v\n", err)
		return exitFailed
	}
}

type usageError string

func (u usageError) Error() string { return string(u) }

func (o options) open(getenv func(string) string, stderr io.Writer) (configcenter.Store, error) {
	if o.file != "" {
		return configcenter.FileStore{Path: o.file}, nil
	}
	// The tool reports every failure itself; the SDK's warnings (it logs one even
	// for a normal close) are only for --verbose.
	log := slog.New(slog.DiscardHandler)
	if o.verbose {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	tlsOn, caFile, err := configcenter.NacosTLSFromEnv()
	if err != nil {
		return nil, err
	}
	return configcenter.NewNacosStore(configcenter.NacosConfig{
		Addr: o.nacos, Namespace: o.namespace, Group: o.group, DataID: o.dataID,
		Username: o.username, Password: getenv("FLASHSALE_NACOS_PASSWORD"), TLS: tlsOn, CAFile: caFile, Log: log,
	})
}

// historyPath keeps the log next to the file, or per server and document for Nacos.
func (o options) historyPath() string {
	if o.history != "" {
		return o.history
	}
	if o.file != "" {
		return o.file + ".history.jsonl"
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, strings.Join([]string{o.nacos, o.namespace, o.group, o.dataID}, "_"))
	return filepath.Join(home, ".flashsale", "configctl-"+name+".history.jsonl")
}
