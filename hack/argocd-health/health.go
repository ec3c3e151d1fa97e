// Package argocdhealth runs Argo CD resource health scripts (health.lua) the way Argo CD
// runs one set in argocd-cm (resource.customizations.health.<group>_<Kind>): gopher-lua
// v1.1.2 (Lua 5.1) with only the package, base and table libraries opened, the object as
// the global obj, a one-second budget, and the returned table read as
// {status, message}. A script that needs any other library (string, math, os, io) fails
// here as it would in Argo CD.
package argocdhealth

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// HealthStatus is what a health script returns, as Argo CD reads it.
type HealthStatus struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// The health codes Argo CD accepts from a script; any other becomes Unknown.
var validStatuses = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true,
	"Suspended": true, "Missing": true, "Unknown": true,
}

// InvalidHealthStatus is the message Argo CD reports for a status it does not know.
const InvalidHealthStatus = "Lua returned an invalid health status"

// scriptBudget is how long Argo CD lets one script run.
const scriptBudget = time.Second

// Run evaluates script with obj (a Kubernetes object decoded from JSON or YAML) bound to
// the global obj.
func Run(script string, obj map[string]any) (HealthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return HealthStatus{}, fmt.Errorf("open the %q library: %w", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), scriptBudget)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", decode(l, obj))
	if err := l.DoString(script); err != nil {
		return HealthStatus{}, err
	}
	returned, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return HealthStatus{}, fmt.Errorf("expect table output from Lua script, not %s", l.Get(-1).Type())
	}
	status, err := stringField(returned, "status")
	if err != nil {
		return HealthStatus{}, err
	}
	message, err := stringField(returned, "message")
	if err != nil {
		return HealthStatus{}, err
	}
	if !validStatuses[status] {
		return HealthStatus{Status: "Unknown", Message: InvalidHealthStatus}, nil
	}
	return HealthStatus{Status: status, Message: message}, nil
}

// stringField reads a returned field; Argo CD decodes the table into a struct of strings,
// so a field of another type is an error there too.
func stringField(t *lua.LTable, name string) (string, error) {
	switch v := t.RawGetString(name).(type) {
	case *lua.LNilType:
		return "", nil
	case lua.LString:
		return string(v), nil
	default:
		return "", fmt.Errorf("the script returned %s = %s (a %s); want a string", name, v.String(), v.Type())
	}
}

// decode turns a decoded JSON value into Lua values as Argo CD does: objects and arrays
// become tables (arrays from index 1), numbers LNumber, json.Number a string.
func decode(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(decode(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), decode(l, item))
		}
		return tbl
	}
	return lua.LNil
}
