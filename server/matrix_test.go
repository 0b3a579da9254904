package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// A route's outcomes, one per caller (in the order of callers): anonymous,
// owner's viewer, owner's runner, stranger's viewer, stranger's runner,
// all-users viewer, all-users runner, admin.
type outcomes [8]int

// routeCase is how the matrix tries a route: the request (its path with
// the fixture's ids in it, and its body) and what each caller gets.
type routeCase struct {
	path, body string
	want       outcomes
	// owned: the route reaches one of alice's things by the path's id;
	// a stranger's answer must then be exactly a missing id's.
	owned bool
}

// routeMatrix is the one table of who may do what on every route of the
// OpenAPI document: a route the document has and the table has not fails
// TestRouteMatrix, so that no route is served without an ownership
// decision.
func routeMatrix(o *ownersFixture) map[string]routeCase {
	const (
		ok      = 200
		created = 201
		no      = 401
		bad     = 403
		nf      = 404
	)
	chat := `{"model": "greeter", "messages": [{"role": "user", "content": "hi"}]}`
	agui := `{"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "hi"}]}`
	get := `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}`
	mcp := `{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}`
	everyone := outcomes{ok, ok, ok, ok, ok, ok, ok, ok}
	keyed := outcomes{no, ok, ok, ok, ok, ok, ok, ok}
	reach := outcomes{no, ok, ok, nf, nf, ok, ok, ok}
	runs := outcomes{no, bad, ok, bad, ok, bad, ok, ok}
	return map[string]routeCase{
		"POST /v1/runs":                                {path: "/v1/runs", body: `{"agent": "greeter"}`, want: outcomes{no, bad, created, bad, created, bad, created, created}},
		"GET /v1/runs":                                 {path: "/v1/runs", want: keyed},
		"GET /v1/runs/{id}":                            {path: "/v1/runs/" + o.done, want: reach, owned: true},
		"GET /v1/runs/{id}/events":                     {path: "/v1/runs/" + o.done + "/events", want: reach, owned: true},
		"GET /v1/runs/{id}/audit":                      {path: "/v1/runs/" + o.paused + "/audit", want: reach, owned: true},
		"POST /v1/runs/{id}/abort":                     {path: "/v1/runs/" + o.done + "/abort", want: outcomes{no, bad, 409, bad, nf, bad, 409, 409}, owned: true},
		"POST /v1/runs/{id}/resume":                    {path: "/v1/runs/" + o.paused + "/resume", body: `{"approve": ["nope"]}`, want: outcomes{no, bad, 400, bad, nf, bad, bad, 400}, owned: true},
		"GET /v1/evals":                                {path: "/v1/evals", want: keyed},
		"GET /v1/evals/{id}":                           {path: "/v1/evals/" + o.eval, want: reach, owned: true},
		"GET /v1/evals/{id}/compare/{baseline}":        {path: "/v1/evals/" + o.eval + "/compare/" + o.eval, want: reach, owned: true},
		"GET /v1/whoami":                               {path: "/v1/whoami", want: keyed},
		"GET /v1/agents":                               {path: "/v1/agents", want: keyed},
		"GET /v1/models":                               {path: "/v1/models", want: keyed},
		"POST /v1/chat/completions":                    {path: "/v1/chat/completions", body: chat, want: runs},
		"POST /v1/responses":                           {path: "/v1/responses", body: `{"model": "greeter", "input": "hi"}`, want: runs},
		"GET /v1/responses/{id}":                       {path: "/v1/responses/" + o.done, want: reach, owned: true},
		"POST /v1/responses/{id}/cancel":               {path: "/v1/responses/" + o.done + "/cancel", want: outcomes{no, bad, ok, bad, nf, bad, ok, ok}, owned: true},
		"DELETE /v1/responses/{id}":                    {path: "/v1/responses/" + o.done, want: outcomes{no, bad, 409, bad, nf, bad, bad, 409}, owned: true},
		"POST /ag-ui/{agent}":                          {path: "/ag-ui/greeter", body: agui, want: runs},
		"POST /mcp":                                    {path: "/mcp", body: mcp, want: runs},
		"GET /mcp":                                     {path: "/mcp", want: outcomes{405, 405, 405, 405, 405, 405, 405, 405}},
		"DELETE /mcp":                                  {path: "/mcp", want: outcomes{405, 405, 405, 405, 405, 405, 405, 405}},
		"POST /a2a":                                    {path: "/a2a", body: get, want: keyed},
		"POST /a2a/{agent}":                            {path: "/a2a/greeter", body: get, want: keyed},
		"GET /.well-known/agent-card.json":             {path: "/.well-known/agent-card.json", want: everyone},
		"GET /a2a/{agent}/.well-known/agent-card.json": {path: "/a2a/greeter/.well-known/agent-card.json", want: everyone},
		"GET /healthz":                                 {path: "/healthz", want: everyone},
		"GET /readyz":                                  {path: "/readyz", want: everyone},
		"GET /openapi.json":                            {path: "/openapi.json", want: everyone},
		"POST /v1/conversations":                       {path: "/v1/conversations", body: `{}`, want: outcomes{no, bad, created, bad, created, bad, created, created}},
		"GET /v1/conversations":                        {path: "/v1/conversations", want: keyed},
		"GET /v1/conversations/{id}":                   {path: "/v1/conversations/" + o.conv, want: reach, owned: true},
		"POST /v1/conversations/{id}/messages":         {path: "/v1/conversations/" + o.conv + "/messages", body: `{"message": "hello"}`, want: outcomes{no, bad, created, bad, nf, bad, bad, bad}, owned: true},
		"POST /v1/conversations/{id}/fork":             {path: "/v1/conversations/" + o.conv + "/fork", body: `{}`, want: outcomes{no, bad, created, bad, nf, bad, bad, created}, owned: true},
		"DELETE /v1/conversations/{id}":                {path: "/v1/conversations/" + o.busy, want: outcomes{no, bad, 409, bad, nf, bad, bad, 409}, owned: true},
	}
}

// TestRouteMatrix tries every route and method of the OpenAPI document
// with every kind of caller, as the owner of what the route reaches and
// as a stranger to it, and checks each answer against routeMatrix; a
// stranger's answer on a route that names one of alice's things must be
// exactly the answer for an id that does not exist.
func TestRouteMatrix(t *testing.T) {
	o := newOwnersFixture(t, Config{})
	matrix := routeMatrix(o)
	doc := openAPIDoc(t)
	var routes []string
	for path, ops := range doc["paths"].(map[string]any) {
		for method := range ops.(map[string]any) {
			routes = append(routes, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(routes)
	for _, route := range routes {
		if _, ok := matrix[route]; !ok {
			t.Errorf("%s is in the OpenAPI document but not in routeMatrix: decide who may call it, and whose things it reaches", route)
		}
	}
	for route := range matrix {
		if !slices.Contains(routes, route) {
			t.Errorf("routeMatrix has %s, which the OpenAPI document does not", route)
		}
	}
	for _, route := range routes {
		rc, ok := matrix[route]
		if !ok {
			continue
		}
		method, _, _ := strings.Cut(route, " ")
		t.Run(route, func(t *testing.T) {
			for i, c := range callers {
				code, _, body := o.raw(t, method, rc.path, c.key, rc.body)
				if code != rc.want[i] {
					t.Errorf("%s: %d, want %d: %s", c.name, code, rc.want[i], clip(body))
				}
				if !rc.owned || code != 404 {
					continue
				}
				// Another user's thing answers as a missing one: the same
				// status and body, but for the id.
				id := idIn(rc.path, o)
				_, _, missing := o.raw(t, method, strings.ReplaceAll(rc.path, id, "run_0000000000000000"), c.key, rc.body)
				if got, want := strings.ReplaceAll(string(body), id, "ID"), strings.ReplaceAll(string(missing), "run_0000000000000000", "ID"); got != want {
					t.Errorf("%s: another user's answers\n%s\nnot as a missing one's\n%s", c.name, got, want)
				}
			}
		})
	}
}

// idIn is the fixture's id a path names.
func idIn(path string, o *ownersFixture) string {
	for _, id := range []string{o.done, o.paused, o.eval, o.conv, o.busy} {
		if strings.Contains(path, id) {
			return id
		}
	}
	return ""
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// TestListingsScoped: a listing of runs or evaluations holds alice's
// only for a caller that reaches them; ?user= does not widen a caller's
// reach.
func TestListingsScoped(t *testing.T) {
	o := newOwnersFixture(t, Config{})
	sees := map[string]bool{"alice-view": true, "alice-run": true, "bob-view": false, "bob-run": false, "carol-all": true, "dave-allrun": true, "root-key": true}
	for key, want := range sees {
		for _, path := range []string{"/v1/runs", "/v1/runs?user=alice", "/v1/evals", "/v1/evals?user=alice"} {
			id := o.done
			if strings.HasPrefix(path, "/v1/evals") {
				id = o.eval
			}
			code, _, body := o.raw(t, "GET", path, key, "")
			if got := strings.Contains(string(body), id); code != 200 || got != want {
				t.Errorf("%s %s: %d, lists alice's %v, want %v", key, path, code, got, want)
			}
		}
	}
	// An admin lists one user's with ?user=.
	if _, _, body := o.raw(t, "GET", "/v1/runs?user=bob", "root-key", ""); strings.Contains(string(body), o.done) {
		t.Errorf("?user=bob lists alice's run: %s", clip(body))
	}
	// A page from a cursor that is another user's run is the page from a
	// cursor that names no run: it tells neither that the run exists nor
	// when it was made.
	for _, path := range []string{"/v1/runs?cursor=", "/v1/evals?cursor="} {
		id := o.done
		if strings.HasPrefix(path, "/v1/evals") {
			id = o.eval
		}
		o.do(t, "POST", "/v1/runs?wait=true", "bob-run", `{"agent": "greeter"}`) // bob has runs of his own
		_, _, theirs := o.raw(t, "GET", path+id, "bob-view", "")
		_, _, none := o.raw(t, "GET", path+"run_0000000000000000", "bob-view", "")
		if string(theirs) != string(none) {
			t.Errorf("%s another user's run: %s, not as no run's: %s", path, clip(theirs), clip(none))
		}
	}
	// A2A's ListTasks lists the caller's user's tasks.
	task := o.a2aTask(t, "/a2a/greeter", `"TASK_STATE_COMPLETED"`)
	list := `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}`
	for key, want := range map[string]bool{"alice-view": true, "alice-run": true, "bob-view": false, "bob-run": false} {
		if _, _, body := o.raw(t, "POST", "/a2a/greeter", key, list); strings.Contains(string(body), task) != want || rpcError(body) != 0 {
			t.Errorf("%s ListTasks lists alice's task: %v, want %v: %s", key, !want, want, clip(body))
		}
	}
}

// a2aCase is how the A2A matrix tries a method of the request handler:
// its JSON-RPC names in A2A 1.0 and 0.3 ("" where 0.3 has none), its
// params (%s: alice's task), whether it names her task, and the outcome
// each caller gets: "ok", "forbidden", "missing" (as a task that does
// not exist), or a JSON-RPC error code.
type a2aCase struct {
	v1, v0        string
	params1       string
	params0       string
	names         bool
	want          [8]string
	completedTask bool // the task named is alice's completed one, not her waiting one
	runningTask   bool // the task named is alice's running one (its run held)
}

// a2aMatrix is the one table of who may call each method of the A2A
// request handler; TestA2AMatrix fails for a method of a2asrv's
// RequestHandler it lacks.
func a2aMatrix() map[string]a2aCase {
	const (
		ok  = "ok"
		bad = "forbidden"
		nf  = "missing"
	)
	msg1 := `{"message": {"messageId": "m%[2]d", "role": "ROLE_USER", "parts": [{"text": "hi"}]%[1]s}}`
	msg0 := `{"message": {"kind": "message", "messageId": "m%[2]d", "role": "user", "parts": [{"kind": "text", "text": "hi"}]%[1]s}}`
	push := [8]string{"-31401", "-32003", "-32003", "-32003", "-32003", "-32003", "-32003", "-32003"}
	return map[string]a2aCase{
		"GetTask":    {v1: "GetTask", v0: "tasks/get", params1: `{"id": "%s"}`, params0: `{"id": "%s"}`, names: true, want: [8]string{"-31401", ok, ok, nf, nf, ok, ok, ok}},
		"ListTasks":  {v1: "ListTasks", params1: `{}`, want: [8]string{"-31401", ok, ok, ok, ok, ok, ok, ok}},
		"CancelTask": {v1: "CancelTask", v0: "tasks/cancel", params1: `{"id": "%s"}`, params0: `{"id": "%s"}`, names: true, completedTask: true, want: [8]string{"-31401", bad, "-32002", bad, nf, bad, "-32002", "-32002"}},
		// A message to alice's waiting task that decides nothing: it
		// stays waiting, told how to answer.
		"SendMessage":          {v1: "SendMessage", v0: "message/send", params1: msg1, params0: msg0, names: true, want: [8]string{"-31401", bad, ok, bad, nf, bad, bad, ok}},
		"SendStreamingMessage": {v1: "SendStreamingMessage", v0: "message/stream", params1: msg1, params0: msg0, want: [8]string{"-31401", bad, ok, bad, ok, bad, ok, ok}},
		"SubscribeToTask":      {v1: "SubscribeToTask", v0: "tasks/resubscribe", params1: `{"id": "%s"}`, params0: `{"id": "%s"}`, names: true, runningTask: true, want: [8]string{"-31401", ok, ok, nf, nf, ok, ok, ok}},
		"GetTaskPushConfig":    {v1: "GetTaskPushNotificationConfig", v0: "tasks/pushNotificationConfig/get", params1: `{"taskId": "%s", "id": "c1"}`, params0: `{"id": "%s"}`, names: true, want: push},
		"ListTaskPushConfigs":  {v1: "ListTaskPushNotificationConfigs", v0: "tasks/pushNotificationConfig/list", params1: `{"taskId": "%s"}`, params0: `{"id": "%s"}`, names: true, want: push},
		"CreateTaskPushConfig": {v1: "CreateTaskPushNotificationConfig", v0: "tasks/pushNotificationConfig/set", params1: `{"taskId": "%s", "url": "http://127.0.0.1:1/hook"}`,
			params0: `{"taskId": "%s", "pushNotificationConfig": {"url": "http://127.0.0.1:1/hook"}}`, names: true, want: push},
		"DeleteTaskPushConfig": {v1: "DeleteTaskPushNotificationConfig", v0: "tasks/pushNotificationConfig/delete", params1: `{"taskId": "%s", "id": "c1"}`,
			params0: `{"id": "%s", "pushNotificationConfigId": "c1"}`, names: true, want: push},
		"GetExtendedAgentCard": {v1: "GetExtendedAgentCard", v0: "agent/getAuthenticatedExtendedCard", params1: `{}`, params0: `{}`,
			want: [8]string{"-31401", "-32004", "-32004", "-32004", "-32004", "-32004", "-32004", "-32004"}},
	}
}

// TestA2AMatrix tries every method of the A2A request handler, in A2A 1.0
// and 0.3, with every kind of caller, on alice's tasks, and checks each
// answer against a2aMatrix: another user's task answers exactly as a
// task that does not exist.
func TestA2AMatrix(t *testing.T) {
	o := newOwnersFixture(t, Config{})
	matrix := a2aMatrix()
	handler := reflect.TypeFor[a2asrv.RequestHandler]()
	for i := range handler.NumMethod() {
		if _, ok := matrix[handler.Method(i).Name]; !ok {
			t.Errorf("a2asrv.RequestHandler.%s is not in a2aMatrix: decide who may call it", handler.Method(i).Name)
		}
	}
	// alice's tasks: one completed (greeter), one waiting for input
	// (approver, its run paused for approval).
	done := o.a2aTask(t, "/a2a/greeter", `"TASK_STATE_COMPLETED"`)
	waiting := o.a2aTask(t, "/a2a/approver", `"TASK_STATE_INPUT_REQUIRED"`)
	running := o.a2aTask(t, "/a2a/waiter", `"TASK_STATE_`)
	n := 0
	for name, mc := range matrix {
		for _, v := range []struct{ method, params, path string }{{mc.v1, mc.params1, "1.0"}, {mc.v0, mc.params0, "0.3"}} {
			if v.method == "" {
				continue
			}
			t.Run(name+" "+v.path, func(t *testing.T) {
				task := waiting
				switch {
				case mc.completedTask:
					task = done
				case mc.runningTask:
					task = running
				}
				for i, c := range callers {
					n++
					params := v.params
					if strings.Contains(params, "%[1]s") {
						extra := ""
						if mc.names {
							extra = `, "taskId": "` + task + `"`
						}
						params = fmt.Sprintf(params, extra, n)
					} else if mc.names {
						params = fmt.Sprintf(params, task)
					}
					body := fmt.Sprintf(`{"jsonrpc": "2.0", "id": %d, "method": %q, "params": %s}`, n, v.method, params)
					endpoint := "/a2a/approver"
					switch {
					case mc.runningTask:
						endpoint = "/a2a/waiter"
					case mc.completedTask || !mc.names:
						endpoint = "/a2a/greeter"
					}
					_, _, got := o.raw(t, "POST", endpoint, c.key, body)
					if err := a2aOutcome(got, mc.want[i]); err != nil {
						t.Errorf("%s: %v: %s", c.name, err, clip(got))
					}
					if mc.want[i] != "missing" {
						continue
					}
					missing := strings.ReplaceAll(body, task, "no-such-task")
					_, _, other := o.raw(t, "POST", endpoint, c.key, missing)
					if a, b := sseIDsOut(strings.ReplaceAll(string(got), task, "ID")), sseIDsOut(strings.ReplaceAll(string(other), "no-such-task", "ID")); a != b {
						t.Errorf("%s: another user's task answers\n%s\nnot as a missing one's\n%s", c.name, a, b)
					}
				}
			})
		}
	}
}

// a2aOutcome says how an A2A answer differs from the outcome wanted.
func a2aOutcome(data []byte, want string) error {
	code := rpcError(data)
	switch want {
	case "ok":
		if code != 0 {
			return fmt.Errorf("JSON-RPC error %d, want none", code)
		}
	case "forbidden":
		if code != -31403 {
			return fmt.Errorf("JSON-RPC error %d, want -31403 (forbidden)", code)
		}
	case "missing":
		if code != -32001 {
			return fmt.Errorf("JSON-RPC error %d, want -32001 (task not found)", code)
		}
	default:
		if fmt.Sprint(code) != want {
			return fmt.Errorf("JSON-RPC error %d, want %s", code, want)
		}
	}
	return nil
}

// a2aTask is the id of a task alice's runner starts at endpoint, which
// ends in state (the waiter's: at once, going on).
func (o *ownersFixture) a2aTask(t *testing.T, endpoint, state string) string {
	t.Helper()
	_, _, body := o.raw(t, "POST", endpoint, "alice-run", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
		"params": {"message": {"messageId": "start", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
		"configuration": {"returnImmediately": `+fmt.Sprint(endpoint == "/a2a/waiter")+`}}}`)
	var res struct {
		Result struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.Result.Task.ID == "" || !strings.Contains(string(body), state) {
		t.Fatalf("alice's task at %s: %v %s", endpoint, err, body)
	}
	return res.Result.Task.ID
}

// sseIDsOut is an answer without the ids of its server-sent events (the
// SDK gives each a random one).
func sseIDsOut(s string) string {
	lines := strings.Split(s, "\n")
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "id: ") }), "\n")
}
