package apitest

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// Main runs a package's tests from its TestMain and returns the exit code. When the
// whole suite ran (no -run, -skip or -list) and passed, it fails the suite if an
// operation of service was reached by none of its tests through Wrap, except those
// in exempt ("METHOD /path" -> why no test reaches it); an exemption the spec lacks,
// or a test reached, fails it too, so the list never outlives its reasons. With -v
// it also lists, per operation, the answers the spec lists that no test saw.
func Main(m *testing.M, service string, exempt map[string]string) int {
	code := m.Run()
	if code != 0 || !wholeSuite() {
		return code
	}
	v := For(service)
	var problems []string
	known := map[string]bool{}
	for _, op := range v.Operations() {
		known[op] = true
	}
	missing := map[string]bool{}
	for _, op := range v.Unexercised() {
		missing[op] = true
		if _, ok := exempt[op]; !ok {
			problems = append(problems, fmt.Sprintf("  %s: no test reached it (add one, or exempt it with a reason)", op))
		}
	}
	for op := range exempt {
		switch {
		case !known[op]:
			problems = append(problems, fmt.Sprintf("  %s: exempt, but the spec has no such operation of %s", op, service))
		case !missing[op]:
			problems = append(problems, fmt.Sprintf("  %s: exempt, but a test reached it: drop the exemption", op))
		}
	}
	if testing.Verbose() {
		unseen := v.UnseenAnswers()
		ops := make([]string, 0, len(unseen))
		for op := range unseen {
			ops = append(ops, op)
		}
		sort.Strings(ops)
		for _, op := range ops {
			fmt.Printf("api/openapi.yaml (%s): %s: no test saw the answers %v\n", service, op, unseen[op])
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		fmt.Fprintf(os.Stderr, "FAIL: api/openapi.yaml: operations of %s the tests of this package do not exercise:\n%s\n",
			service, strings.Join(problems, "\n"))
		return 1
	}
	return 0
}

// wholeSuite reports whether every test of the package was asked to run.
func wholeSuite() bool {
	for _, name := range []string{"test.run", "test.skip", "test.list"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return true
}
