package server

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// An A2A request's rights are decided on the request the SDK executes:
// a2aHandler stands between the SDK's JSON-RPC bindings and its request
// handler, and each of its methods takes the typed request the binding
// decoded, decides what the caller may do with it, and passes it on (or
// refuses it). Nothing is decided on a parse of the body of its own, so
// no body can be read one way to authorise it and another to execute it;
// a method the handler does not know is no method of RequestHandler, and
// the binding refuses it.

// a2aHandler authorises each A2A method, then hands it to the SDK's
// handler: reading a task needs the role viewer and a task of the
// caller's user; starting or cancelling one, the role runner; answering
// a task that waits for input (deciding the calls its run waits for),
// the task's own user's runner or an admin. A run a message starts takes
// its slot here, a stream its stream slot, so that a full server refuses
// before any task exists. Another user's task is, to the caller, a task
// that does not exist: the task store (a2aTasks) does not find it.
type a2aHandler struct {
	s     *Server
	h     a2asrv.RequestHandler
	tasks *a2aTasks
}

// a2aHandler implements every method of the SDK's request handler
// itself: a method added to the interface fails the build until it is
// given a decision here.
var _ a2asrv.RequestHandler = a2aHandler{}

// refuse records the HTTP status of a refusal for the response and
// returns its JSON-RPC error: base is the A2A error it is, code
// agentry's.
func refuse(ctx context.Context, status int, base error, code, msg string) error {
	if rp, ok := ctx.Value(a2aReplyKey{}).(*a2aReply); ok {
		rp.status.CompareAndSwap(0, int32(status))
	}
	return a2a.NewError(base, msg).WithDetails(map[string]any{"code": code})
}

// needs refuses a caller whose role is below min.
func needs(ctx context.Context, min Role, method string) error {
	if callerOf(ctx).at(min) {
		return nil
	}
	return refuse(ctx, http.StatusForbidden, a2a.ErrUnauthorized, "forbidden", fmt.Sprintf("%s needs the role %s", method, min))
}

// unseen is the id the SDK is given for a task the caller names: the
// task's own, or, for another user's task, an id no task has, so that
// every path of the SDK (its task store, and its running executions,
// which a subscription or a message reaches without the store) answers
// exactly as it answers a task that does not exist.
func (h a2aHandler) unseen(ctx context.Context, id a2a.TaskID) a2a.TaskID {
	if owner, ok := h.tasks.owner(id); ok && !callerOf(ctx).sees(owner) {
		return a2a.NewTaskID()
	}
	return id
}

// answers readies a message for the SDK: to another user's task, it
// names no task that exists (unseen); to a task the caller sees but
// whose run's approvals it may not decide (a key that reaches every
// user's tasks, answering another user's), it is refused.
func (h a2aHandler) answers(ctx context.Context, req *a2a.SendMessageRequest) (*a2a.SendMessageRequest, error) {
	if req == nil || req.Message == nil || req.Message.TaskID == "" {
		return req, nil
	}
	id := req.Message.TaskID
	if other := h.unseen(ctx, id); other != id {
		msg, r := *req.Message, *req
		msg.TaskID, r.Message = other, &msg
		return &r, nil
	}
	owner, ok := h.tasks.owner(id)
	if c := callerOf(ctx); ok && !c.decides(owner) {
		return nil, refuse(ctx, http.StatusForbidden, a2a.ErrUnauthorized, "forbidden",
			fmt.Sprintf("task %s is %s's: only its own runner key or an admin answers it", id, ownerName(owner)))
	}
	return req, nil
}

// slot takes a run slot for the run a message may start or go on with,
// in the context the executor claims it from; done gives it back unless
// a run claimed it.
func (h a2aHandler) slot(ctx context.Context) (context.Context, func(), error) {
	if rf := h.s.admitted(); rf != nil {
		return ctx, nil, refuse(ctx, rf.status, a2a.ErrServerError, rf.code, rf.message)
	}
	slot := &a2aSlot{}
	return context.WithValue(ctx, a2aSlotKey{}, slot), func() {
		if slot.claim() { // no run took it
			h.s.release()
		}
	}, nil
}

// stream takes a stream slot; done gives it back.
func (h a2aHandler) stream(ctx context.Context) (func(), error) {
	select {
	case h.s.streams <- struct{}{}:
		return h.s.releaseStream, nil
	default:
		return nil, refuse(ctx, http.StatusTooManyRequests, a2a.ErrServerError, "too_many_streams",
			fmt.Sprintf("the server streams %d runs' events at once; try again", cap(h.s.streams)))
	}
}

// GetTask implements a2asrv.RequestHandler: a viewer's, of its own tasks.
func (h a2aHandler) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	if err := needs(ctx, RoleViewer, "GetTask"); err != nil {
		return nil, err
	}
	r := *req
	r.ID = h.unseen(ctx, req.ID)
	return h.h.GetTask(ctx, &r)
}

// ListTasks implements a2asrv.RequestHandler: the caller's own tasks.
func (h a2aHandler) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	if err := needs(ctx, RoleViewer, "ListTasks"); err != nil {
		return nil, err
	}
	return h.h.ListTasks(ctx, req)
}

// CancelTask implements a2asrv.RequestHandler: a runner's, of a task it
// reaches. A cancel of a task that waits for input while the SDK still
// closes its execution goes to that execution, which takes no more
// events, and fails: it is tried again once the execution is closed.
func (h a2aHandler) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	if err := needs(ctx, RoleRunner, "CancelTask"); err != nil {
		return nil, err
	}
	r := *req
	r.ID = h.unseen(ctx, req.ID)
	req = &r
	for i := 0; ; i++ {
		task, err := h.h.CancelTask(ctx, req)
		if err == nil || !h.waiting(ctx, req.ID) || !settle(ctx, i) {
			return task, err
		}
	}
}

// waiting says whether the task waits for input.
func (h a2aHandler) waiting(ctx context.Context, id a2a.TaskID) bool {
	t, err := h.h.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
	return err == nil && t.Status.State == a2a.TaskStateInputRequired
}

// SendMessage implements a2asrv.RequestHandler: a runner's, starting a
// task or answering one of its own. A message to a task whose last
// execution the SDK is still closing waits for it: the SDK answers a
// task that waits for input as soon as it has that state, and ends the
// execution after, so a client quick to answer would be told the task is
// "already in progress".
func (h a2aHandler) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	if err := needs(ctx, RoleRunner, "SendMessage"); err != nil {
		return nil, err
	}
	req, err := h.answers(ctx, req)
	if err != nil {
		return nil, err
	}
	ctx, done, err := h.slot(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	for i := 0; ; i++ {
		res, err := h.h.SendMessage(ctx, req)
		if !busy(err, req) {
			return res, err
		}
		if !settle(ctx, i) {
			return nil, stillBusy(req)
		}
	}
}

// SendStreamingMessage implements a2asrv.RequestHandler, as SendMessage,
// in a stream slot.
func (h a2aHandler) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if err := needs(ctx, RoleRunner, "SendStreamingMessage"); err != nil {
			yield(nil, err)
			return
		}
		req, err := h.answers(ctx, req)
		if err != nil {
			yield(nil, err)
			return
		}
		endStream, err := h.stream(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		defer endStream()
		ctx, done, err := h.slot(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		defer done()
		for i := 0; ; i++ {
			refused := false
			for ev, err := range h.h.SendStreamingMessage(ctx, req) {
				if refused = busy(err, req); refused {
					break // the refusal comes first, before any event
				}
				if !yield(ev, err) {
					return
				}
			}
			if !refused {
				return
			}
			if !settle(ctx, i) {
				yield(nil, stillBusy(req))
				return
			}
		}
	}
}

// SubscribeToTask implements a2asrv.RequestHandler: a viewer's, of its
// own tasks, in a stream slot.
func (h a2aHandler) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if err := needs(ctx, RoleViewer, "SubscribeToTask"); err != nil {
			yield(nil, err)
			return
		}
		endStream, err := h.stream(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		defer endStream()
		r := *req
		r.ID = h.unseen(ctx, req.ID)
		for ev, err := range h.h.SubscribeToTask(ctx, &r) {
			if !yield(ev, err) {
				return
			}
		}
	}
}

// errNoPush is the answer to every push notification method: agentry
// offers none (a client follows a task by streaming or by asking).
func errNoPush(ctx context.Context) error {
	return refuse(ctx, http.StatusBadRequest, a2a.ErrPushNotificationNotSupported, "push_not_supported",
		"this server sends no push notifications: stream the task (SendStreamingMessage, SubscribeToTask) or ask for it (GetTask)")
}

// GetTaskPushConfig implements a2asrv.RequestHandler: refused.
func (h a2aHandler) GetTaskPushConfig(ctx context.Context, _ *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return nil, errNoPush(ctx)
}

// ListTaskPushConfigs implements a2asrv.RequestHandler: refused.
func (h a2aHandler) ListTaskPushConfigs(ctx context.Context, _ *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	return nil, errNoPush(ctx)
}

// CreateTaskPushConfig implements a2asrv.RequestHandler: refused.
func (h a2aHandler) CreateTaskPushConfig(ctx context.Context, _ *a2a.PushConfig) (*a2a.PushConfig, error) {
	return nil, errNoPush(ctx)
}

// DeleteTaskPushConfig implements a2asrv.RequestHandler: refused.
func (h a2aHandler) DeleteTaskPushConfig(ctx context.Context, _ *a2a.DeleteTaskPushConfigRequest) error {
	return errNoPush(ctx)
}

// GetExtendedAgentCard implements a2asrv.RequestHandler: a viewer's (the
// SDK answers that no extended card is configured).
func (h a2aHandler) GetExtendedAgentCard(ctx context.Context, req *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	if err := needs(ctx, RoleViewer, "GetExtendedAgentCard"); err != nil {
		return nil, err
	}
	return h.h.GetExtendedAgentCard(ctx, req)
}

// a2aTasks is the SDK's task store, with an owner for each task: the
// user of the caller who created it. A task is found only by a caller
// who reaches its owner; to any other it does not exist, so every method
// that names a task (GetTask, CancelTask, SubscribeToTask, a message to
// it) answers another user's task exactly as a missing one.
type a2aTasks struct {
	*taskstore.InMemory
	mu     sync.Mutex
	owners map[a2a.TaskID]string
}

func newA2ATasks() *a2aTasks {
	return &a2aTasks{InMemory: taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: storeUser}),
		owners: map[a2a.TaskID]string{}}
}

// storeUser is the user the SDK's task store acts for: the caller's, or
// the task's owner for a caller that reaches it (an admin, a key that
// reaches every user's), whom the store, which masks another user's task
// as missing, would not let through.
func storeUser(ctx context.Context) (string, error) {
	if owner, ok := ctx.Value(actAsKey{}).(string); ok {
		return a2aName(owner), nil
	}
	return a2aName(callerOf(ctx).user), nil
}

type actAsKey struct{}

// reach is ctx acting as the owner of task id, when the caller reaches
// it; false when it does not.
func (t *a2aTasks) reach(ctx context.Context, id a2a.TaskID) (context.Context, bool) {
	owner, ok := t.owner(id)
	if !ok {
		return ctx, true // no such task: the store says so
	}
	if !callerOf(ctx).sees(owner) {
		return ctx, false
	}
	return context.WithValue(ctx, actAsKey{}, owner), true
}

// Create implements taskstore.Store: the task is its creator's.
func (t *a2aTasks) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	v, err := t.InMemory.Create(ctx, task)
	if err == nil {
		t.mu.Lock()
		t.owners[task.ID] = callerOf(ctx).user
		t.mu.Unlock()
	}
	return v, err
}

// Get implements taskstore.Store: a task the caller does not reach is
// not found.
func (t *a2aTasks) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	ctx, ok := t.reach(ctx, id)
	if !ok {
		return nil, a2a.ErrTaskNotFound
	}
	return t.InMemory.Get(ctx, id)
}

// Update implements taskstore.Store: a task the caller reaches is
// updated as its owner's.
func (t *a2aTasks) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	if req == nil || req.Task == nil {
		return t.InMemory.Update(ctx, req) // refused there, as malformed
	}
	ctx, ok := t.reach(ctx, req.Task.ID)
	if !ok {
		return taskstore.TaskVersionMissing, a2a.ErrTaskNotFound
	}
	return t.InMemory.Update(ctx, req)
}

// owner is the user of the task's creator.
func (t *a2aTasks) owner(id a2a.TaskID) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.owners[id]
	return o, ok
}

// a2aReply is what the authoriser tells the response: the HTTP status of
// its refusal (0: none), for the binding that writes it.
type a2aReply struct{ status atomic.Int32 }

type a2aReplyKey struct{}

// a2aWriter writes an A2A response with the status of the authoriser's
// refusal, when there is one: the SDK's bindings answer every JSON-RPC
// error with 200, so the status is held until the first byte is written
// (a stream's headers too), and a refusal's replaces it. It lets the SDK
// flush (a stream) through the server's response writer, which may be
// wrapped (the request log's).
type a2aWriter struct {
	http.ResponseWriter
	reply  *a2aReply
	status int
	sent   bool
}

func (w *a2aWriter) WriteHeader(status int) {
	if !w.sent {
		w.status = status
	}
}

// commit writes the status and headers held, once.
func (w *a2aWriter) commit() {
	if w.sent {
		return
	}
	w.sent = true
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	if refused := int(w.reply.status.Load()); refused != 0 && status == http.StatusOK {
		status = refused
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *a2aWriter) Write(b []byte) (int, error) {
	w.commit()
	return w.ResponseWriter.Write(b)
}

func (w *a2aWriter) Flush() {
	w.commit()
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *a2aWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
