package validate

import (
	"fmt"
	"regexp"
	"strings"
)

// A secret in a process's argv is readable by every user of the host
// (/proc/<pid>/cmdline, ps) and lands in audit logs; in its environment or a file it
// is readable by its own user alone. CheckNoSecretInArgv reads a container's command
// (a shell script or a plain argv, joined) the way a shell would run it and refuses
// the words that put a password into some command's arguments. What it leaves alone:
// the bodies of heredocs (they go to a file or to stdin), and variable assignments,
// alone on a line or before a command (they go to the environment).
var (
	heredocStartRe = regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`)
	assignmentRe   = regexp.MustCompile(`^(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=(?:"(?:\\.|[^"\\])*"|'[^']*'|[^\s;]*)\s*;?\s*`)
	argvSecretRes  = []struct {
		re  *regexp.Regexp
		why string
	}{
		{regexp.MustCompile(`(?i)password=`), "password= in a command's arguments"},
		{regexp.MustCompile(`(?:^|[\s"'])-p["'$A-Za-z0-9{(]`), "-p<password> (a MySQL client's password flag with its value)"},
		{regexp.MustCompile(`(?i)--password(?:[=\s]|$)`), "--password with its value"},
		{regexp.MustCompile(`(?:^|\s)redis-cli\b[^\n|;&]*\s-a\s`), "redis-cli -a <password> (use REDISCLI_AUTH)"},
		{regexp.MustCompile(`(?i)--(?:requirepass|masterauth)\b`), "a Redis password as a redis-server flag (write it to the config on stdin)"},
	}
)

// ShellCommands is script without its heredoc bodies and its variable assignments:
// the words that become some process's arguments.
func ShellCommands(script string) string {
	var out []string
	end := ""
	for _, line := range strings.Split(script, "\n") {
		if end != "" {
			if strings.TrimSpace(line) == end {
				end = ""
			}
			continue
		}
		if m := heredocStartRe.FindStringSubmatch(line); m != nil {
			end = m[1]
		}
		rest := strings.TrimSpace(line)
		for {
			loc := assignmentRe.FindStringIndex(rest)
			if loc == nil || loc[1] == 0 {
				break
			}
			rest = rest[loc[1]:]
		}
		if rest != "" {
			out = append(out, rest)
		}
	}
	return strings.Join(out, "\n")
}

// CheckNoSecretInArgv lists what in cmd (a container's command and args, a probe's or
// a healthcheck's, joined by spaces or newlines) puts a secret on a command line.
func CheckNoSecretInArgv(cmd string) []string {
	commands := ShellCommands(cmd)
	var out []string
	for _, r := range argvSecretRes {
		if m := r.re.FindString(commands); m != "" {
			out = append(out, fmt.Sprintf("%s (%q): pass it in the environment, a file or stdin, never in argv", r.why, strings.TrimSpace(m)))
		}
	}
	return out
}
