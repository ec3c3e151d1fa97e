package argocdhealth

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// missingLibraries are the globals Lua's other libraries define; an argocd-cm script has
// none of them, so a use of one fails in Argo CD only when that line runs.
var missingLibraries = map[string]bool{
	"string": true, "math": true, "os": true, "io": true,
	"debug": true, "coroutine": true, "channel": true,
}

// LibraryUses lists, with their lines, the uses in script of a library Argo CD does not
// open for argocd-cm scripts, and every method call (s:find(...) needs the string
// library's metatable on strings). It reads the whole script, so a branch no test case
// reaches is checked too.
func LibraryUses(script string) ([]string, error) {
	chunk, err := parse.Parse(strings.NewReader(script), "health.lua")
	if err != nil {
		return nil, err
	}
	var uses []string
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			switch node := v.Interface().(type) {
			case *ast.IdentExpr:
				if missingLibraries[node.Value] {
					uses = append(uses, fmt.Sprintf("line %d: %s", node.Line(), node.Value))
				}
			case *ast.FuncCallExpr:
				if node.Receiver != nil {
					uses = append(uses, fmt.Sprintf("line %d: method call :%s()", node.Line(), node.Method))
				}
			}
			walk(v.Elem())
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(chunk))
	return uses, nil
}
