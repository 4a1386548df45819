package validate

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Shards is the number of logical Redis shards (docs/CONTRACT.md).
const Shards = 16

// Invocation is one service process as a deployment file starts it.
type Invocation struct {
	Where  string          // file and service/workload, for messages
	Binary string          // grab-service, promo-admin, recovery, configctl
	Args   []string        // after the binary (a recovery subcommand first)
	Env    map[string]bool // environment variables set
	// EnvValue is the literal values of Env (a Secret's are not known).
	EnvValue map[string]string
}

// Command is the binary plus its subcommand, as help is asked of it.
func (inv Invocation) Command() []string {
	if inv.Binary == "recovery" && len(inv.Args) > 0 && !strings.HasPrefix(inv.Args[0], "-") {
		return []string{"recovery", inv.Args[0]}
	}
	return []string{inv.Binary}
}

// Flags parses the invocation's flags, given which flags take no value.
func (inv Invocation) Flags(boolFlags map[string]bool) (map[string]string, []string) {
	args := inv.Args[len(inv.Command())-1:]
	out := map[string]string{}
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			positional = append(positional, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		if k, v, ok := strings.Cut(name, "="); ok {
			out[k] = v
			continue
		}
		if boolFlags[name] || i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") {
			out[name] = "true"
			continue
		}
		out[name] = args[i+1]
		i++
	}
	return out, positional
}

// FlagSet is what a binary's -h says it accepts: flag name -> takes a value.
type FlagSet map[string]bool

var (
	helpRe = regexp.MustCompile(`^\s+--?([A-Za-z0-9][A-Za-z0-9._-]*)(?:[ =]+(\S+))?`)
	// A usage synopsis instead of Go's flag list: [--file PATH] [--verbose].
	synopsisRe = regexp.MustCompile(`--([a-z][a-z0-9-]*)( [A-Z][A-Z0-9:_-]*)?`)
)

var (
	helpMu    sync.Mutex
	helpCache = map[string]FlagSet{}
)

// BinaryFlags runs bin/<binary> [subcommand] -h (or $FLASHSALE_VALIDATE_BIN/<binary>) and parses Go's flag usage (or, for a
// custom usage text, its synopsis of --flags). It
// returns nil, with no error, when the binary is not built.
func BinaryFlags(cmd []string) (FlagSet, error) {
	key := strings.Join(cmd, " ")
	helpMu.Lock()
	defer helpMu.Unlock()
	if fs, ok := helpCache[key]; ok {
		return fs, nil
	}
	bin := Path("bin", cmd[0])
	if dir := os.Getenv("FLASHSALE_VALIDATE_BIN"); dir != "" {
		bin = filepath.Join(dir, cmd[0]) // binaries built elsewhere than bin/
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, nil
	}
	c := exec.Command(bin, append(cmd[1:], "-h")...)
	c.Dir = os.TempDir()
	out, _ := c.CombinedOutput() // -h exits 0 or 2 depending on the flag set's policy
	fs := FlagSet{}
	for _, line := range strings.Split(string(out), "\n") {
		if m := helpRe.FindStringSubmatch(line); m != nil {
			fs[m[1]] = m[2] != "" && !strings.HasPrefix(m[2], "\t")
		}
	}
	if len(fs) == 0 {
		for _, m := range synopsisRe.FindAllStringSubmatch(string(out), -1) {
			fs[m[1]] = fs[m[1]] || m[2] != ""
		}
	}
	if len(fs) == 0 {
		return nil, fmt.Errorf("%s -h listed no flags:\n%s", key, out)
	}
	helpCache[key] = fs
	return fs, nil
}

// RequiredEnv is every FLASHSALE_*_TOKEN a module's code requires (svc.TokenSpec).
func RequiredEnv(module string) ([]string, error) {
	re := regexp.MustCompile(`Env:\s*"(FLASHSALE_[A-Z_]+)"`)
	var out []string
	err := filepath.WalkDir(Path(module), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// RedisUserEnv and RedisPasswordEnv are the services' Redis ACL credentials (svc.RedisAuthFromEnv).
const (
	RedisUserEnv     = "FLASHSALE_REDIS_USERNAME"
	RedisPasswordEnv = "FLASHSALE_REDIS_PASSWORD"
)

// MySQLEnv is the environment variable the services read their MySQL DSN from (svc.MySQLEnv).
const MySQLEnv = "FLASHSALE_MYSQL_DSN"

// Kafka's SASL settings every Kafka client reads (internal/kafkaauth), and the one
// mechanism the brokers enable.
const (
	KafkaMechanismEnv = "FLASHSALE_KAFKA_SASL_MECHANISM"
	KafkaUserEnv      = "FLASHSALE_KAFKA_USERNAME"
	KafkaPasswordEnv  = "FLASHSALE_KAFKA_PASSWORD"
	KafkaTLSEnv       = "FLASHSALE_KAFKA_TLS"
	KafkaCAEnv        = "FLASHSALE_KAFKA_CA_FILE"
	KafkaMechanism    = "SCRAM-SHA-512"
)

// OpsPorts is each server's ops port (--ops-listen :PORT), by binary (recovery: the
// flow sink): /metrics and grab-service's pprof are served there only.
var OpsPorts = map[string]string{"grab-service": "9180", "promo-admin": "9181", "recovery": "9182"}

// NacosPasswordEnv is the Nacos password of --nacos-username (configcenter) and of
// configctl's --username.
const NacosPasswordEnv = "FLASHSALE_NACOS_PASSWORD"

// Expected addresses the deployment files must pass.
type Expected struct {
	Redis     []string // index = logical shard
	Sentinels []string // the Redis Sentinels that elect the shards' masters
	Kafka     []string
	Nacos     string
	// ShardHosts are the hosts of the shards' servers, masters and replicas (the
	// StatefulSets' pods and Services, the compose services); ShardPrefixes the name
	// prefixes they share, which a --redis-allow glob must keep.
	ShardHosts    []string
	ShardPrefixes []string
}

// CheckInvocation checks one service process: known flags, no --local, the 16 shard
// addresses in order, every Kafka broker, a MySQL DSN, and the tokens its code requires.
func CheckInvocation(inv Invocation, want Expected, errs *Errs, note func(string)) {
	modules := map[string]string{"grab-service": "grab-service", "promo-admin": "promo-admin", "recovery": "recovery"}
	cmd := inv.Command()
	known, err := BinaryFlags(cmd)
	if err != nil {
		errs.Addf("%s: %v", inv.Where, err)
	}
	bools := map[string]bool{}
	for f, takesValue := range known {
		bools[f] = !takesValue
	}
	flags, positional := inv.Flags(bools)
	if known == nil {
		note(fmt.Sprintf("%s: bin/%s not built; its flags are not checked against it", inv.Where, cmd[0]))
	}
	for f := range flags {
		if _, ok := known[f]; ok || known == nil {
			continue
		}
		errs.Addf("%s: %s has no flag --%s", inv.Where, strings.Join(cmd, " "), f)
	}
	if len(positional) > 0 && inv.Binary != "configctl" {
		errs.Addf("%s: stray arguments %v", inv.Where, positional)
	}
	if _, ok := flags["local"]; ok {
		errs.Addf("%s: --local (development tokens) in a production deployment", inv.Where)
	}
	if inv.Binary == "configctl" {
		if flags["nacos"] != want.Nacos {
			errs.Addf("%s: configctl --nacos %q, want %q", inv.Where, flags["nacos"], want.Nacos)
		}
		if flags["username"] == "" || !inv.Env[NacosPasswordEnv] {
			errs.Addf("%s: configctl needs --username and %s: Nacos runs with auth on", inv.Where, NacosPasswordEnv)
		}
		return
	}
	if RecordOnly[strings.Join(cmd, " ")] {
		checkRecordOnly(inv, flags, errs)
		return
	}
	// Nacos has auth on: whoever reads the switches names its user.
	if _, ok := flags["nacos"]; ok && (flags["nacos-username"] == "" || !inv.Env[NacosPasswordEnv]) {
		errs.Addf("%s: --nacos needs --nacos-username and %s: Nacos runs with auth on", inv.Where, NacosPasswordEnv)
	}
	// Every Kafka client authenticates (SCRAM); the brokers have no PLAINTEXT client listener.
	if !inv.Env[KafkaMechanismEnv] || !inv.Env[KafkaUserEnv] || !inv.Env[KafkaPasswordEnv] && !inv.Env[KafkaPasswordEnv+"_FILE"] {
		errs.Addf("%s: a Kafka client without %s, %s and %s: the brokers accept SASL (SCRAM) clients only", inv.Where, KafkaMechanismEnv, KafkaUserEnv, KafkaPasswordEnv)
	}
	checkRedisFollowing(inv, flags, want, errs)
	checkRedisAllow(inv, flags, want, errs)
	if r, ok := flags["redis"]; ok || cmd[len(cmd)-1] != "sink" {
		if got := strings.Split(r, ","); !slices.Equal(got, want.Redis) {
			errs.Addf("%s: --redis must list the %d shard masters in shard order %v, is %v", inv.Where, Shards, want.Redis, got)
		}
	}
	if k := strings.Split(flags["kafka"], ","); !slices.Equal(k, want.Kafka) {
		errs.Addf("%s: --kafka %v, want every broker %v", inv.Where, k, want.Kafka)
	}
	// The DSN holds a password: argv shows it to every process (/proc/<pid>/cmdline).
	if _, ok := flags["mysql"]; ok {
		errs.Addf("%s: --mysql puts the DSN, password included, in argv; set %s (from the Secret) instead", inv.Where, MySQLEnv)
	} else if !inv.Env[MySQLEnv] && !inv.Env[MySQLEnv+"_FILE"] {
		errs.Addf("%s: %s (or %s_FILE) is not set: the service would use the local stack's DSN", inv.Where, MySQLEnv, MySQLEnv)
	}
	// Every Redis client authenticates as its service's ACL user (the sink's healer too).
	if _, redis := flags["redis"]; (redis || cmd[len(cmd)-1] != "sink") && (!inv.Env[RedisUserEnv] || !inv.Env[RedisPasswordEnv] && !inv.Env[RedisPasswordEnv+"_FILE"]) {
		errs.Addf("%s: %s and %s must be set: the shards require an ACL user per service", inv.Where, RedisUserEnv, RedisPasswordEnv)
	}
	// A sale goes live only once an approver approved it (docs/CONTRACT.md, "Approval").
	if cmd[0] == "promo-admin" && flags["require-approval"] != "true" {
		errs.Addf("%s: promo-admin must run with --require-approval in production: a merchandiser's create or change waits for an approver", inv.Where)
	}
	if cmd[0] == "grab-service" && flags["nacos"] != want.Nacos {
		errs.Addf("%s: --nacos %q, want %q", inv.Where, flags["nacos"], want.Nacos)
	}
	server := len(cmd) == 1 || cmd[1] == "sink"
	if server {
		checkMaxConns(inv, flags, errs)
	}
	if l, ok := flags["listen"]; ok != server || ok && !strings.HasPrefix(l, ":") {
		errs.Addf("%s: servers listen on all interfaces (--listen :PORT), one-shot commands do not listen; have %q", inv.Where, l)
	}
	// /metrics and pprof are served on the ops listener only: a server without one
	// would keep its default, 127.0.0.1, which Prometheus cannot reach.
	if o, ok := flags["ops-listen"]; ok != server {
		errs.Addf("%s: servers serve /metrics on --ops-listen :PORT, one-shot commands have no ops listener; have %q", inv.Where, o)
	} else if want := ":" + OpsPorts[cmd[0]]; ok && o != want {
		errs.Addf("%s: --ops-listen %q, want %q (Prometheus scrapes it; the network policies admit it)", inv.Where, o, want)
	}
	if mod, ok := modules[cmd[0]]; ok && (len(cmd) == 1 || cmd[1] == "sink") {
		env, err := RequiredEnv(mod)
		if err != nil {
			errs.Addf("%s: %v", inv.Where, err)
		}
		for _, e := range env {
			if !inv.Env[e] {
				errs.Addf("%s: %s is required outside --local and not set", inv.Where, e)
			}
		}
	}
}

// checkRedisFollowing: every Redis client follows the masters the sentinels elect, and
// the flow sink runs the healer, which rebuilds a promoted replica or a master back
// empty; it needs the shards, the sentinels and the switches (on-call's shardAddrs).
func checkRedisFollowing(inv Invocation, flags map[string]string, want Expected, errs *Errs) {
	cmd := inv.Command()
	if s := strings.Split(flags["redis-sentinels"], ","); !slices.Equal(s, want.Sentinels) {
		errs.Addf("%s: --redis-sentinels %v, want every sentinel %v: without them a lost master stays lost", inv.Where, s, want.Sentinels)
	}
	if cmd[len(cmd)-1] != "sink" {
		return
	}
	if flags["heal"] != "true" {
		errs.Addf("%s: the flow sink must run with --heal: nothing else rebuilds a shard the sentinels failed over", inv.Where)
	}
	if _, ok := flags["redis"]; !ok {
		errs.Addf("%s: the flow sink's healer needs --redis (the %d shard masters)", inv.Where, Shards)
	}
	if flags["nacos"] != want.Nacos {
		errs.Addf("%s: the flow sink's healer follows on-call's shardAddrs: --nacos %q, want %q", inv.Where, flags["nacos"], want.Nacos)
	}
}

// RecordOnly are the commands that use MySQL alone (recovery archive keeps the record
// in bounds; recovery migrate brings its schema up): no shard, broker or switches.
var RecordOnly = map[string]bool{"recovery archive": true, "recovery migrate": true}

// IsRecordOnly reports whether a flashsale/recovery container's args run one of
// RecordOnly's commands.
func IsRecordOnly(args []string) bool {
	return len(args) > 0 && RecordOnly["recovery "+args[0]]
}

// checkRecordOnly checks a command that uses MySQL alone: the DSN from the
// environment, never argv; and, least privilege, no address or credential of a
// backend it does not use.
func checkRecordOnly(inv Invocation, flags map[string]string, errs *Errs) {
	if _, ok := flags["mysql"]; ok {
		errs.Addf("%s: --mysql puts the DSN, password included, in argv; set %s (from the Secret) instead", inv.Where, MySQLEnv)
	} else if !inv.Env[MySQLEnv] && !inv.Env[MySQLEnv+"_FILE"] {
		errs.Addf("%s: %s (or %s_FILE) is not set: the command would use the local stack's DSN", inv.Where, MySQLEnv, MySQLEnv)
	}
	for _, f := range []string{"redis", "redis-sentinels", "kafka", "nacos", "listen", "ops-listen"} {
		if _, ok := flags[f]; ok {
			errs.Addf("%s: %s uses MySQL only; --%s has no place", inv.Where, strings.Join(inv.Command(), " "), f)
		}
	}
	for _, e := range []string{RedisUserEnv, RedisPasswordEnv, RedisPasswordEnv + "_FILE", KafkaUserEnv, KafkaPasswordEnv, KafkaPasswordEnv + "_FILE", NacosPasswordEnv} {
		if inv.Env[e] {
			errs.Addf("%s: %s uses MySQL only; it must not carry %s", inv.Where, strings.Join(inv.Command(), " "), e)
		}
	}
}
