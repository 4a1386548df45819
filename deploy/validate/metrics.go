package validate

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Metric is one metric family the services register, as found in their source.
type Metric struct {
	Name   string   // full name: namespace_subsystem_name
	Type   string   // counter, gauge, histogram or summary
	Labels []string // variable labels
	Where  string   // file:line of the definition
}

// Series are the series names a family exposes (a histogram's _bucket, _sum, _count).
func (m Metric) Series() []string {
	switch m.Type {
	case "histogram":
		return []string{m.Name + "_bucket", m.Name + "_sum", m.Name + "_count"}
	case "summary":
		return []string{m.Name, m.Name + "_sum", m.Name + "_count"}
	}
	return []string{m.Name}
}

// ScanMetrics finds every prometheus.New{Counter,Gauge,Histogram,Summary}[Vec|Func] call
// in the repository's Go sources (tests and this module aside) and works out each
// metric's full name. Namespace, Subsystem and Name may be string literals, constants of
// the same file, or a parameter of the enclosing function, whose values are then taken
// from every call of that function with a literal argument (httpx.NewRouteMetrics(reg,
// "grab")). A name that cannot be resolved is an error: the scan must see every metric.
func ScanMetrics(root string) (map[string]Metric, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".run", "bin", "testdata", "node_modules":
				return filepath.SkipDir
			}
			if p == filepath.Join(root, "deploy", "validate") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s := scanner{fset: fset, files: files, out: map[string]Metric{}}
	for _, f := range files {
		s.file(f)
	}
	if len(s.errs) > 0 {
		return s.out, s.errs.Err()
	}
	return s.out, nil
}

type scanner struct {
	fset  *token.FileSet
	files []*ast.File
	out   map[string]Metric
	errs  Errs
}

var ctorType = map[string]string{
	"NewCounter": "counter", "NewCounterVec": "counter", "NewCounterFunc": "counter",
	"NewGauge": "gauge", "NewGaugeVec": "gauge", "NewGaugeFunc": "gauge",
	"NewHistogram": "histogram", "NewHistogramVec": "histogram",
	"NewSummary": "summary", "NewSummaryVec": "summary",
}

func (s *scanner) file(f *ast.File) {
	consts := stringConsts(f)
	for _, decl := range f.Decls {
		fn, _ := decl.(*ast.FuncDecl)
		ast.Inspect(decl, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !isIdent(sel.X, "prometheus") {
				return true
			}
			typ, ok := ctorType[sel.Sel.Name]
			if !ok || len(call.Args) == 0 {
				return true
			}
			opts, ok := call.Args[0].(*ast.CompositeLit)
			if !ok {
				s.errs.Addf("%s: %s options are not a literal; cannot name the metric", s.fset.Position(call.Pos()), sel.Sel.Name)
				return true
			}
			var labels []string
			if strings.HasSuffix(sel.Sel.Name, "Vec") && len(call.Args) > 1 {
				labels = stringList(call.Args[1], consts)
			}
			parts := map[string][]string{"Namespace": {""}, "Subsystem": {""}, "Name": nil}
			for _, el := range opts.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				if key == nil {
					continue
				}
				if _, want := parts[key.Name]; !want {
					continue
				}
				vals := s.values(kv.Value, consts, fn)
				if len(vals) == 0 {
					s.errs.Addf("%s: cannot resolve %s of a metric", s.fset.Position(kv.Pos()), key.Name)
				}
				parts[key.Name] = vals
			}
			for _, ns := range parts["Namespace"] {
				for _, sub := range parts["Subsystem"] {
					for _, name := range parts["Name"] {
						full := joinName(ns, sub, name)
						s.out[full] = Metric{Name: full, Type: typ, Labels: labels, Where: s.fset.Position(call.Pos()).String()}
					}
				}
			}
			return true
		})
	}
}

func joinName(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "_")
}

// values resolves an expression to its possible string values.
func (s *scanner) values(e ast.Expr, consts map[string]string, fn *ast.FuncDecl) []string {
	switch v := e.(type) {
	case *ast.BasicLit:
		if str, err := strconv.Unquote(v.Value); err == nil {
			return []string{str}
		}
	case *ast.Ident:
		if c, ok := consts[v.Name]; ok {
			return []string{c}
		}
		if fn != nil {
			if idx := paramIndex(fn, v.Name); idx >= 0 {
				return s.callArgs(fn.Name.Name, idx)
			}
		}
	}
	return nil
}

// callArgs is every literal string passed as argument idx to a function named name.
func (s *scanner) callArgs(name string, idx int) []string {
	seen := map[string]bool{}
	for _, f := range s.files {
		consts := stringConsts(f)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) <= idx {
				return true
			}
			var callee string
			switch fun := call.Fun.(type) {
			case *ast.Ident:
				callee = fun.Name
			case *ast.SelectorExpr:
				callee = fun.Sel.Name
			}
			if callee != name {
				return true
			}
			switch a := call.Args[idx].(type) {
			case *ast.BasicLit:
				if str, err := strconv.Unquote(a.Value); err == nil {
					seen[str] = true
				}
			case *ast.Ident:
				if c, ok := consts[a.Name]; ok {
					seen[c] = true
				}
			}
			return true
		})
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

func paramIndex(fn *ast.FuncDecl, name string) int {
	i := 0
	for _, field := range fn.Type.Params.List {
		if len(field.Names) == 0 {
			i++
			continue
		}
		for _, n := range field.Names {
			if n.Name == name {
				return i
			}
			i++
		}
	}
	return -1
}

// stringConsts are the string constants declared anywhere in f (function bodies too).
func stringConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		gd, ok := n.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			return true
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if str, err := strconv.Unquote(lit.Value); err == nil {
							out[name.Name] = str
						}
					}
				}
			}
		}
		return true
	})
	return out
}

func stringList(e ast.Expr, consts map[string]string) []string {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []string
	for _, el := range lit.Elts {
		switch v := el.(type) {
		case *ast.BasicLit:
			if str, err := strconv.Unquote(v.Value); err == nil {
				out = append(out, str)
			}
		case *ast.Ident:
			if c, ok := consts[v.Name]; ok {
				out = append(out, c)
			}
		}
	}
	return out
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// String lists the metrics, one a line, for failure messages.
func describe(ms map[string]Metric) string {
	names := make([]string, 0, len(ms))
	for n, m := range ms {
		names = append(names, fmt.Sprintf("  %s (%s%s)", n, m.Type, labelSuffix(m.Labels)))
	}
	sort.Strings(names)
	return strings.Join(names, "\n")
}

func labelSuffix(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return " {" + strings.Join(l, ",") + "}"
}
