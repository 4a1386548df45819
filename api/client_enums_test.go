package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/flashsale/platform/api"
)

// The Go client (client/) copies the contract's enums by hand, as constants: a value
// the spec gains and the client lacks is one a checkout engineer cannot name, and a
// constant the spec does not hold is one no service sends. Each of the client's
// enum types is held here to its schema, both ways.
func TestClientEnumsMatchTheSpec(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	consts := clientConsts(t, "../client")
	schemas := doc.Components.Schemas
	cancelReason := doc.Paths.Find("/v1/grab/{requestId}/cancel").Post.RequestBody.Value.
		Content.Get("application/json").Schema.Value.Properties["reason"]
	for typ, schema := range map[string]*openapi3.SchemaRef{
		"Result":       schemas["GrabResult"].Value.Properties["result"],
		"Decision":     schemas["GrabDecision"],
		"Code":         schemas["Error"].Value.Properties["code"],
		"Channel":      schemas["Channel"],
		"State":        schemas["State"],
		"CancelReason": cancelReason,
	} {
		var spec []string
		for _, v := range schema.Value.Enum {
			spec = append(spec, v.(string))
		}
		slices.Sort(spec)
		got := consts[typ]
		slices.Sort(got)
		if len(spec) == 0 || !slices.Equal(got, spec) {
			t.Errorf("client.%s holds %v; the spec's enum is %v", typ, got, spec)
		}
	}
}

// clientConsts reads the string constants of dir's non-test Go files by their
// declared type: const X T = "V" gives T -> V.
func clientConsts(t *testing.T, dir string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the client's files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	out := map[string][]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || vs.Type == nil || len(vs.Values) != len(vs.Names) {
				return true
			}
			typ, ok := vs.Type.(*ast.Ident)
			if !ok {
				return true
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					out[typ.Name] = append(out[typ.Name], s)
				}
			}
			return true
		})
	}
	return out
}
