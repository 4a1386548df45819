package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A checkout team generates its client from this file with oapi-codegen: every field
// of the types it gets must have a type, the result and code it branches on above all.
// An enum narrowed inline in an allOf (no type of its own) comes out interface{}.
//
// The generator is the tool pinned in api/gentool/go.mod, built by `go tool` (cached
// after the first build; offline once the module cache holds it). OPENAPI_SPEC runs the
// test over another spec, e.g. an older one: git show REV:api/openapi.yaml > /tmp/old.yaml.
func TestGeneratedClientHasNoUntypedField(t *testing.T) {
	spec, err := filepath.Abs("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s := os.Getenv("OPENAPI_SPEC"); s != "" {
		spec = s
	}
	// Read here so that go test's cache knows the inputs the generator reads.
	for _, f := range []string{spec, "gentool/go.mod", "gentool/go.sum"} {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	src := generate(t, spec)
	file, err := parser.ParseFile(token.NewFileSet(), "client.go", src, 0)
	if err != nil {
		t.Fatalf("the generated client does not parse: %v", err)
	}
	var untyped []string
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.TYPE {
			continue
		}
		for _, spec := range gen.Specs {
			ts := spec.(*ast.TypeSpec)
			if _, iface := ts.Type.(*ast.InterfaceType); iface {
				continue // the client's own interfaces (ClientInterface, HttpRequestDoer)
			}
			untyped = append(untyped, untypedFields(ts.Name.Name, ts.Type)...)
		}
	}
	for _, f := range untyped {
		t.Errorf("untyped field in the generated client: %s", f)
	}
	if len(untyped) == 0 && !strings.Contains(string(src), "JSON200 *struct") {
		t.Fatal("the generated client has no typed response bodies: is this the client generation?")
	}
}

// generate runs the pinned oapi-codegen over spec (models and the client with its
// response types) and returns the Go source; a spec it refuses fails the test.
func generate(t *testing.T, spec string) []byte {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "client.go")
	cfg := filepath.Join(dir, "cfg.yaml")
	conf := "package: client\ngenerate:\n  models: true\n  client: true\noutput: " + out + "\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to run the generator with")
	}
	cmd := exec.Command(goBin, "tool", "oapi-codegen", "-config", cfg, spec)
	cmd.Dir = "gentool"
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen refused %s: %v\n%s", spec, err, msg)
	}
	src, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// untypedFields names every struct field under typ (nested structs, pointers, slices
// included) whose type is interface{} or any. A map's values are left alone: a map is
// the spec's free-form object (the served document itself), not a field that lost its
// type.
func untypedFields(path string, typ ast.Expr) []string {
	switch x := typ.(type) {
	case *ast.StarExpr:
		return untypedFields(path, x.X)
	case *ast.ArrayType:
		return untypedFields(path+"[]", x.Elt)
	case *ast.InterfaceType:
		return []string{path}
	case *ast.Ident:
		if x.Name == "any" {
			return []string{path}
		}
	case *ast.StructType:
		var found []string
		for _, f := range x.Fields.List {
			names := []string{"(embedded)"}
			if len(f.Names) > 0 {
				names = names[:0]
				for _, n := range f.Names {
					names = append(names, n.Name)
				}
			}
			for _, n := range names {
				found = append(found, untypedFields(path+"."+n, f.Type)...)
			}
		}
		return found
	}
	return nil
}
