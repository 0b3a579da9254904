// The npm AG-UI client (@ag-ui/client) against agentry's AG-UI endpoint:
// it runs an agent whose tool call waits for approval, sees the run end
// with an interrupt, resumes it with an approval on the same thread,
// and prints what it saw as one JSON line for the Go test to check.
//
//   node agui-client.cjs URL KEY MESSAGE
// with NODE_PATH naming the node_modules that hold "@ag-ui/client".
const { HttpAgent, buildResumeArray } = require("@ag-ui/client");

// run runs the agent once and returns what the run showed: its events'
// types, how it finished, and its result.
async function run(agent, params) {
  const seen = { types: [] };
  await agent.runAgent(params, {
    onEvent({ event }) {
      seen.types.push(event.type);
    },
    onRunFinishedEvent({ outcome, result, interrupts }) {
      seen.outcome = outcome;
      seen.result = result;
      seen.interrupts = interrupts;
    },
    onRunErrorEvent({ event }) {
      seen.error = event.message;
    },
  });
  return seen;
}

async function main() {
  const [url, key, message] = process.argv.slice(2);
  const agent = new HttpAgent({ url, headers: { Authorization: `Bearer ${key}` }, threadId: "thread-npm", initialState: { theme: "dark" } });
  agent.messages = [{ id: "u1", role: "user", content: message }];
  const out = { runs: [] };
  out.runs.push(await run(agent, { runId: "ag-run-1" }));
  out.pending = agent.pendingInterrupts.map((i) => ({ id: i.id, reason: i.reason, toolCallId: i.toolCallId }));
  const answers = {};
  for (const i of agent.pendingInterrupts) answers[i.id] = { status: "resolved", payload: { approved: true } };
  out.runs.push(await run(agent, { runId: "ag-run-2", resume: buildResumeArray(agent.pendingInterrupts, answers) }));
  out.pendingAfter = agent.pendingInterrupts.length;
  out.messages = agent.messages.map((m) => ({
    role: m.role,
    content: m.content,
    toolCalls: (m.toolCalls || []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
    toolCallId: m.toolCallId,
  }));
  out.state = agent.state;
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
