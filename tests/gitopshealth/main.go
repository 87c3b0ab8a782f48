// Command gitopshealth reads the health of Kubernetes objects as the GitOps tools read it, with
// their own code, so that Rillet's statuses are checked against the real readers and not against
// a re-implementation:
//
//   - Flux: kstatus, status.Compute on the object as an unstructured.Unstructured. Flux runs its
//     hard fork github.com/fluxcd/cli-utils; both it and upstream sigs.k8s.io/cli-utils are
//     linked here (versions in go.mod) and must agree, or the program fails.
//   - Argo CD: a health.lua script run in gopher-lua (the VM Argo CD embeds, the version its
//     go.mod pins) the way util/lua/lua.go of Argo CD v3.5.1 runs a resource customization: no
//     standard libraries but package, base and table (Argo CD adds a reduced `os` with time and
//     date only; it is left out here, so a script that needs it fails loudly), a one-second
//     timeout, the object handed over as the global `obj` converted value by value (objects to
//     hash tables, lists to 1-based arrays, every number, int64 included, to a Lua number), the
//     returned table encoded with layeh.com/gopher-json and decoded as {status, message}; a
//     status outside Argo CD's set becomes Unknown. As gitops-engine's GetResourceHealth does
//     around the script, an object being deleted is Progressing ("Pending deletion") and a
//     script error is Unknown with the error as message.
//
// It is test tooling, so it lives under tests/ (nothing in operator/ or the images ships it), in
// a Go module of its own (the go command never walks the Python tree, and go.mod and go.sum pin
// every version); tests/integration/gitopshealth.py builds it once into ~/.cache/rillet, keyed
// by a hash of these sources, and runs it.
//
// Usage: gitopshealth -health-lua charts/rillet/argocd/health.lua < objects.json
//
// Input: a JSON list of objects (as `kubectl get -o json` prints one). Output: one JSON line per
// object, in order: {"kstatus", "kstatusMessage", "argocd", "argocdMessage"}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	fluxstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	luajson "layeh.com/gopher-json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Health is what the program prints for one object.
type Health struct {
	Kstatus        string `json:"kstatus"`
	KstatusMessage string `json:"kstatusMessage"`
	Argocd         string `json:"argocd"`
	ArgocdMessage  string `json:"argocdMessage"`
}

// argoHealth is the {status, message} table a health script returns, as Argo CD decodes it.
type argoHealth struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// Argo CD's health status codes (gitops-engine pkg/health); any other answer is Unknown.
var argoStatuses = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true,
	"Healthy": true, "Degraded": true, "Missing": true,
}

const invalidHealthStatus = "Lua returned an invalid health status"

func main() {
	script := flag.String("health-lua", "", "path of the Argo CD health script (health.lua)")
	flag.Parse()
	if err := run(*script); err != nil {
		fmt.Fprintln(os.Stderr, "gitopshealth:", err)
		os.Exit(1)
	}
}

func run(scriptPath string) error {
	if scriptPath == "" {
		return errors.New("-health-lua is required")
	}
	source, err := os.ReadFile(scriptPath)
	if err != nil {
		return err
	}
	var raws []json.RawMessage
	if err := json.NewDecoder(os.Stdin).Decode(&raws); err != nil {
		return fmt.Errorf("reading a JSON list of objects from stdin: %w", err)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	encoder := json.NewEncoder(out)
	for i, raw := range raws {
		health, err := assess(raw, string(source))
		if err != nil {
			return fmt.Errorf("object %d: %w", i, err)
		}
		if err := encoder.Encode(health); err != nil {
			return err
		}
	}
	return nil
}

func assess(raw json.RawMessage, script string) (*Health, error) {
	// As client-go decodes objects: integers become int64, other numbers float64.
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	name := obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
	computed, err := status.Compute(obj.DeepCopy())
	if err != nil {
		return nil, fmt.Errorf("%s: kstatus: %w", name, err)
	}
	flux, err := fluxstatus.Compute(obj.DeepCopy())
	if err != nil {
		return nil, fmt.Errorf("%s: Flux kstatus: %w", name, err)
	}
	if string(flux.Status) != string(computed.Status) || flux.Message != computed.Message {
		return nil, fmt.Errorf("%s: kstatus says %s (%q), Flux's fork %s (%q)",
			name, computed.Status, computed.Message, flux.Status, flux.Message)
	}
	argo := argocdHealth(obj, script)
	return &Health{
		Kstatus:        string(computed.Status),
		KstatusMessage: computed.Message,
		Argocd:         argo.Status,
		ArgocdMessage:  argo.Message,
	}, nil
}

// argocdHealth is what Argo CD shows for an object whose kind has `script` as health check.
func argocdHealth(obj *unstructured.Unstructured, script string) argoHealth {
	if obj.GetDeletionTimestamp() != nil {
		return argoHealth{Status: "Progressing", Message: "Pending deletion"}
	}
	health, err := runHealthScript(obj, script)
	if err != nil {
		return argoHealth{Status: "Unknown", Message: err.Error()}
	}
	return health
}

func runHealthScript(obj *unstructured.Unstructured, script string) (argoHealth, error) {
	state := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer state.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		call := lua.P{Fn: state.NewFunction(lib.open), NRet: 0, Protect: true}
		if err := state.CallByParam(call, lua.LString(lib.name)); err != nil {
			return argoHealth{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	state.SetContext(ctx)
	state.SetGlobal("obj", toLua(state, obj.Object))
	fn, err := state.LoadString(script)
	if err != nil {
		return argoHealth{}, err
	}
	state.Push(fn)
	if err := state.PCall(0, lua.MultRet, nil); err != nil {
		var apiErr *lua.ApiError
		if errors.As(err, &apiErr) && apiErr.Type == lua.ApiErrorRun {
			apiErr.StackTrace = "" // Argo CD shows the error without Lua's stack trace
		}
		return argoHealth{}, err
	}
	returned := state.Get(-1)
	switch returned.Type() {
	case lua.LTNil:
		return argoHealth{}, nil
	case lua.LTTable:
	default:
		return argoHealth{}, fmt.Errorf("expect table output from Lua script, not %s", returned.Type())
	}
	encoded, err := luajson.Encode(returned)
	if err != nil {
		return argoHealth{}, err
	}
	health := argoHealth{}
	if err := json.Unmarshal(encoded, &health); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) { // an empty table encodes as [], as Argo CD tolerates
			return argoHealth{}, nil
		}
		return argoHealth{}, err
	}
	if !argoStatuses[health.Status] {
		return argoHealth{Status: "Unknown", Message: invalidHealthStatus}, nil
	}
	return health, nil
}

// toLua converts a value of an unstructured object as Argo CD's util/lua does: maps to hash
// tables, slices to arrays (1-based), numbers of every Go type to Lua numbers, json.Number to a
// string; anything else is nil.
func toLua(state *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []any:
		list := state.CreateTable(len(v), 0)
		for _, item := range v {
			list.Append(toLua(state, item))
		}
		return list
	case map[string]any:
		table := state.CreateTable(0, len(v))
		for key, item := range v {
			table.RawSetH(lua.LString(key), toLua(state, item))
		}
		return table
	}
	return lua.LNil
}
