package validate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Root is the repository root: two levels above this package's source, or, where the
// build trimmed source paths, the nearest directory above the working directory that
// holds go.work and deploy/validate.
func Root() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	}
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if isFile(filepath.Join(d, "go.work")) && isFile(filepath.Join(d, "deploy", "validate", "go.mod")) {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Path joins parts under the repository root.
func Path(parts ...string) string {
	return filepath.Join(append([]string{Root()}, parts...)...)
}

// YAMLDocs splits a multi-document YAML file into its documents, without the empty ones.
func YAMLDocs(data []byte) ([][]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out [][]byte
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(n.Content) == 0 {
			continue
		}
		b, err := yaml.Marshal(&n)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
}

// StrictYAML decodes data into v, refusing keys v does not have.
func StrictYAML(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// Files lists the files under dir (relative to the root) whose names end in one of exts,
// sorted, as paths relative to the root.
func Files(dir string, exts ...string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(Path(dir), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		for _, e := range exts {
			if strings.HasSuffix(d.Name(), e) {
				rel, _ := filepath.Rel(Root(), p)
				out = append(out, filepath.ToSlash(rel))
				break
			}
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// Errs collects problems so a test reports them all at once.
type Errs []string

// Addf records one problem.
func (e *Errs) Addf(format string, args ...any) { *e = append(*e, fmt.Sprintf(format, args...)) }

// Err is nil when nothing was recorded.
func (e Errs) Err() error {
	if len(e) == 0 {
		return nil
	}
	return errors.New(strings.Join(e, "\n"))
}
