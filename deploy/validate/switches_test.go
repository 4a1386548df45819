package validate

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

const switchesSource = "configcenter/switches.go"

// switchesStructs reads the switches document's Go structs: struct name -> json name -> Go type.
func switchesStructs(errs *Errs) map[string]map[string]string {
	f, err := parser.ParseFile(token.NewFileSet(), Path(switchesSource), nil, 0)
	if err != nil {
		errs.Addf("%s: %v", switchesSource, err)
		return nil
	}
	out := map[string]map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		fields := map[string]string{}
		for _, fl := range st.Fields.List {
			if fl.Tag == nil {
				continue
			}
			tag, _ := strconv.Unquote(fl.Tag.Value)
			name, _, _ := strings.Cut(tagValue(tag, "json"), ",")
			if name == "" || name == "-" {
				continue
			}
			fields[name] = exprString(fl.Type)
		}
		out[ts.Name.Name] = fields
		return true
	})
	return out
}

func tagValue(tag, key string) string {
	for _, part := range strings.Fields(tag) {
		if k, v, ok := strings.Cut(part, ":"); ok && k == key {
			s, _ := strconv.Unquote(v)
			return s
		}
	}
	return ""
}

func exprString(e ast.Expr) string {
	switch v := e.(type) {
	case *ast.Ident:
		return v.Name
	case *ast.ArrayType:
		return "[]" + exprString(v.Elt)
	case *ast.MapType:
		return "map[" + exprString(v.Key) + "]" + exprString(v.Value)
	}
	return "?"
}

// checkSwitchesDoc checks a switches document against configcenter's Switches struct:
// every key known, every value of its field's type, degradeRateFactor within 0..1.
func checkSwitchesDoc(errs *Errs, path string) {
	data, err := os.ReadFile(Path(path))
	if err != nil {
		errs.Addf("%v", err)
		return
	}
	checkSwitchesData(errs, path, data)
}

func checkSwitchesData(errs *Errs, path string, data []byte) {
	structs := switchesStructs(errs)
	if structs["Switches"] == nil {
		errs.Addf("%s: no Switches struct", switchesSource)
		return
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		errs.Addf("%s: %v", path, err)
		return
	}
	var check func(where string, v any, typ string)
	check = func(where string, v any, typ string) {
		ok := true
		switch {
		case typ == "bool":
			_, ok = v.(bool)
		case typ == "float64" || strings.HasPrefix(typ, "int"):
			_, ok = v.(float64)
		case typ == "string":
			_, ok = v.(string)
		case strings.HasPrefix(typ, "[]"):
			var arr []any
			arr, ok = v.([]any)
			for i, el := range arr {
				check(where+"["+strconv.Itoa(i)+"]", el, typ[2:])
			}
		case structs[typ] != nil:
			var obj map[string]any
			obj, ok = v.(map[string]any)
			for k, val := range obj {
				ft, known := structs[typ][k]
				if !known {
					errs.Addf("%s: %s.%s is not a field of %s (the services reject the whole document)", path, where, k, typ)
					continue
				}
				check(where+"."+k, val, ft)
			}
		default:
			errs.Addf("%s: %s has Go type %s, which this check does not know", path, where, typ)
		}
		if !ok {
			errs.Addf("%s: %s must be a %s", path, where, typ)
		}
	}
	check("$", doc, "Switches")
	if f, ok := doc["degradeRateFactor"].(float64); ok && (f < 0 || f > 1) {
		errs.Addf("%s: degradeRateFactor %v outside 0..1", path, f)
	}
	if doc["grabEnabled"] != true {
		errs.Addf("%s: the seed document must sell (grabEnabled true)", path)
	}
}

// switchesDocID is configcenter's DataID and Group.
func switchesDocID(t *testing.T) (string, string) {
	f, err := parser.ParseFile(token.NewFileSet(), Path(switchesSource), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := stringConsts(f)
	if c["DataID"] == "" || c["Group"] == "" {
		t.Fatalf("%s: no DataID/Group constants", switchesSource)
	}
	return c["DataID"], c["Group"]
}

func TestSwitchesSeedDocument(t *testing.T) {
	var errs Errs
	checkSwitchesDoc(&errs, ComposeSwitches)
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
	// The check itself refuses what the services refuse.
	for name, doc := range map[string]string{
		"unknown key":     `{"grabEnabled": true, "grabsEnabled": false}`,
		"wrong type":      `{"grabEnabled": "yes"}`,
		"factor too big":  `{"grabEnabled": true, "degradeRateFactor": 2}`,
		"nested unknown":  `{"grabEnabled": true, "methodLimits": {"grab": 1, "status": 5}}`,
		"list of numbers": `{"grabEnabled": true, "blockedPromotions": [1]}`,
	} {
		var errs Errs
		checkSwitchesData(&errs, name, []byte(doc))
		if len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}
