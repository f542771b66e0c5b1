package gitops

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

// health is what an Argo CD health script returns.
type health struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// runHealth gives the health Argo CD shows for obj with a custom health
// script. An object being deleted is Progressing, "Pending deletion", as
// Argo CD answers before it runs any health check. Otherwise the script
// runs as Argo CD runs it: obj is the global `obj`, a Lua table of the
// object, and the script returns a table with status and message. Only the
// base and table libraries are open, as for any custom check in Argo CD
// (which also opens package and a subset of os the scripts here do not use):
// a script needing the string library fails here as it does there.
// test/gitops/argocd runs the same cases through Argo CD's own code.
func runHealth(script string, obj map[string]any) (health, error) {
	if metadata, ok := obj["metadata"].(map[string]any); ok && metadata["deletionTimestamp"] != nil {
		return health{Status: "Progressing", Message: "Pending deletion"}, nil
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	L.SetContext(ctx)
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return health{}, err
		}
	}
	value, err := toLua(L, obj)
	if err != nil {
		return health{}, err
	}
	L.SetGlobal("obj", value)
	if err := L.DoString(script); err != nil {
		return health{}, err
	}
	ret := L.Get(-1)
	hs, ok := ret.(*lua.LTable)
	if !ok {
		return health{}, fmt.Errorf("the script returned %s, not a table", ret.Type())
	}
	var h health
	for field, dst := range map[string]*string{"status": &h.Status, "message": &h.Message} {
		v := hs.RawGetString(field)
		s, ok := v.(lua.LString)
		if !ok && v != lua.LNil {
			return health{}, fmt.Errorf("hs.%s is a %s, not a string", field, v.Type())
		}
		*dst = string(s)
	}
	if h.Status == "" {
		return health{}, fmt.Errorf("the script returned no status")
	}
	return h, nil
}

// toLua converts a decoded JSON or unstructured value into Lua: objects into
// tables keyed by name, arrays into tables indexed from 1, numbers, booleans,
// strings, and null into nil (a key holding null is absent, as in Lua).
func toLua(L *lua.LState, v any) (lua.LValue, error) {
	switch v := v.(type) {
	case nil:
		return lua.LNil, nil
	case bool:
		return lua.LBool(v), nil
	case string:
		return lua.LString(v), nil
	case float64:
		return lua.LNumber(v), nil
	case int64:
		return lua.LNumber(v), nil
	case int:
		return lua.LNumber(v), nil
	case int32:
		return lua.LNumber(v), nil
	case json.Number:
		f, err := v.Float64()
		return lua.LNumber(f), err
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			lv, err := toLua(L, e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			t.RawSetString(k, lv)
		}
		return t, nil
	case []any:
		t := L.CreateTable(len(v), 0)
		for i, e := range v {
			lv, err := toLua(L, e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			t.RawSetInt(i+1, lv)
		}
		return t, nil
	default:
		return nil, fmt.Errorf("no Lua value for %T", v)
	}
}

// readObject reads one YAML object as JSON decodes it.
func readObject(path string) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if obj == nil {
		return nil, fmt.Errorf("%s: empty", path)
	}
	return obj, nil
}

// TestToLua checks the conversion the health checks are run with: arrays
// from 1, numbers from JSON and from the API server alike (joined into
// strings as integers), booleans, and null or missing keys as nil.
func TestToLua(t *testing.T) {
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(`
list: [a, b]
maps: [{type: Ready, status: "True"}]
float: 3
negative: -2
truthy: true
falsy: false
empty: ""
nothing: null
nested: {deeper: {value: x}}
`), &obj); err != nil {
		t.Fatal(err)
	}
	obj["int64"] = int64(7) // as unstructured objects from the API server hold integers
	script := `
local checks = {
  #obj.list == 2, obj.list[1] == "a", obj.list[2] == "b", obj.list[0] == nil, obj.list[3] == nil,
  obj.maps[1].type == "Ready", obj.maps[1].status == "True",
  obj.float == 3, obj.negative == -2, obj.int64 == 7, obj.int64 + obj.float == 10,
  "n" .. obj.int64 == "n7", tostring(obj.float) == "3", obj.negative .. "" == "-2",
  obj.truthy == true, obj.falsy == false, obj.empty == "",
  obj.nothing == nil, obj.missing == nil,
  obj.nested.deeper.value == "x",
}
for i, ok in ipairs(checks) do
  if not ok then
    return {status = "Degraded", message = "check " .. i .. " failed"}
  end
end
if #checks ~= 20 then
  return {status = "Degraded", message = #checks .. " checks ran"}
end
return {status = "Healthy", message = "ok"}
`
	got, err := runHealth(script, obj)
	if err != nil {
		t.Fatal(err)
	}
	if got != (health{Status: "Healthy", Message: "ok"}) {
		t.Fatalf("%+v", got)
	}

	// Only base and table are open.
	for _, lib := range []string{
		`string.format("%s", "Healthy")`, `("Healthy"):lower()`, `os.getenv("HOME")`, `math.floor(1)`, `io.read()`,
	} {
		if _, err := runHealth(`return {status = `+lib+`}`, obj); err == nil {
			t.Errorf("%s ran", lib)
		}
	}
	// A deleting object never reaches the script.
	deleting := map[string]any{"metadata": map[string]any{"deletionTimestamp": "2025-05-01T11:00:00Z"}}
	if got, err := runHealth(`error("the script ran")`, deleting); err != nil || got != (health{Status: "Progressing", Message: "Pending deletion"}) {
		t.Fatalf("a deleting object: %+v, %v", got, err)
	}
	if _, err := runHealth(`return "Healthy"`, obj); err == nil {
		t.Fatalf("a script returning a string passed")
	}
	if _, err := toLua(lua.NewState(), map[string]any{"x": struct{}{}}); err == nil {
		t.Fatalf("a value with no Lua counterpart converted")
	}
}
