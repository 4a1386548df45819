// Command findings reads the output of `govulncheck -format json` on stdin and decides
// the check: it prints govulncheck's progress and, for each vulnerability the scanned
// code calls, the module, the fixed version and one call path; it exits 3 when one of
// them is not in the accepted list. Vulnerabilities only in imported or required
// code are listed on one line each, not failed on.
//
// The accepted list (-accept) holds one "ID MODULE reason" a line, # comments allowed:
// a vulnerability whose fix cannot be taken yet, with why. The module is part of the
// key because one entry can cover two (golang.org/x/net and stdlib's copy of it):
// accepting the standard library's part leaves the module's to be upgraded. deploy/vulncheck.sh runs
// it. govulncheck's own exit code is not used because its JSON mode always exits 0.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type message struct {
	Progress *struct {
		Message string `json:"message"`
	} `json:"progress"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *finding `json:"finding"`
}

type finding struct {
	OSV          string  `json:"osv"`
	FixedVersion string  `json:"fixed_version"`
	Trace        []frame `json:"trace"`
}

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
	Position *struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
	} `json:"position"`
}

// vuln is what the scan found of one OSV entry in one module: the deepest level
// reached (3 called, 2 imported, 1 required) and a finding at that level.
type vuln struct {
	id, module string
	level      int
	first      *finding
}

func main() {
	acceptPath := flag.String("accept", "", "file of accepted vulnerabilities: ID MODULE reason, one a line")
	label := flag.String("label", "", "name of what was scanned, for the output")
	flag.Parse()
	accepted, err := readAccepted(*acceptPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "findings:", err)
		os.Exit(1)
	}
	vulns, summaries, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "findings:", err)
		os.Exit(1)
	}
	os.Exit(report(os.Stdout, *label, vulns, summaries, accepted))
}

func readAccepted(path string) (map[string]string, error) {
	accepted := map[string]string{}
	if path == "" {
		return accepted, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("%s:%d: want ID MODULE reason", path, n+1)
		}
		accepted[f[0]+" "+f[1]] = strings.Join(f[2:], " ")
	}
	return accepted, nil
}

// read collects the stream, keyed by "ID MODULE", and the entries' summaries;
// progress messages are printed as they come.
func read(r io.Reader) (map[string]*vuln, map[string]string, error) {
	vulns, summaries := map[string]*vuln{}, map[string]string{}
	dec := json.NewDecoder(bufio.NewReader(r))
	for {
		var m message
		if err := dec.Decode(&m); err == io.EOF {
			return vulns, summaries, nil
		} else if err != nil {
			return nil, nil, fmt.Errorf("reading govulncheck output: %v", err)
		}
		switch {
		case m.Progress != nil:
			fmt.Fprintln(os.Stderr, "  "+m.Progress.Message)
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil && len(m.Finding.Trace) > 0:
			f := m.Finding
			key := f.OSV + " " + f.Trace[0].Module
			v := vulns[key]
			if v == nil {
				v = &vuln{id: f.OSV, module: f.Trace[0].Module}
				vulns[key] = v
			}
			if lvl := level(f.Trace[0]); lvl > v.level {
				v.level, v.first = lvl, m.Finding
			}
		}
	}
}

func level(f frame) int {
	switch {
	case f.Function != "":
		return 3
	case f.Package != "":
		return 2
	}
	return 1
}

// report prints the findings and returns the exit code: 3 if an unaccepted
// vulnerability is called.
func report(w io.Writer, label string, vulns map[string]*vuln, summaries, accepted map[string]string) int {
	keys := make([]string, 0, len(vulns))
	for k := range vulns {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var called, failing, other int
	for _, k := range keys {
		v := vulns[k]
		f := v.first.Trace[0]
		head := fmt.Sprintf("%s %s@%s (fixed in %s): %s", v.id, v.module, f.Version, orNone(v.first.FixedVersion), summaries[v.id])
		switch {
		case v.level < 3:
			other++
			fmt.Fprintf(w, "  not called (%s only): %s\n", [...]string{"", "required", "imported"}[v.level], head)
		case accepted[k] != "":
			called++
			fmt.Fprintf(w, "  called, accepted: %s\n      (%s)\n", head, accepted[k])
		default:
			called++
			failing++
			fmt.Fprintf(w, "  CALLED: %s\n%s", head, path(v.first.Trace))
		}
	}
	fmt.Fprintf(w, "%s: %d vulnerabilities in called code (%d not accepted), %d more only in imported or required code\n",
		label, called, failing, other)
	if failing > 0 {
		return 3
	}
	return 0
}

// path prints a call path from the scanned code (the trace's last frame) to the
// vulnerable function (its first).
func path(trace []frame) string {
	var b strings.Builder
	for i := len(trace) - 1; i >= 0; i-- {
		f := trace[i]
		name := f.Function
		if f.Receiver != "" {
			name = strings.TrimPrefix(f.Receiver, "*") + "." + name
		}
		pos := ""
		if f.Position != nil && f.Position.Filename != "" {
			pos = fmt.Sprintf(" (%s:%d)", f.Position.Filename, f.Position.Line)
		}
		fmt.Fprintf(&b, "      %s.%s%s\n", f.Package, name, pos)
	}
	return b.String()
}

func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}
